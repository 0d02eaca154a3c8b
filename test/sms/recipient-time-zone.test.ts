import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import { errorFields } from '../support/app.ts';
import { startApiTest, type ApiClient, type ApiTest } from '../support/client.ts';
import { forEachDatabase } from '../support/databases.ts';
import { startReceiver } from '../webhooks/support.ts';

// deliverInRecipientTimeZone (ARCHITECTURE.md, "Preflight"): a batch SMS due at one wall-clock
// time on each recipient's clock, its consent decided again when its time comes.

forEachDatabase((dialect) => {
  let api: ApiTest;
  let carol: ApiClient;
  beforeEach(async () => {
    // Thursday 25 March 2027, 12:00 UTC. Paris goes to summer time on Sunday the 28th, New York did on the 14th.
    api = await startApiTest(dialect, { clock: new ManualClock(Date.UTC(2027, 2, 25, 12)) });
    carol = await api.client();
  });
  afterEach(() => api.close());

  const batch = (body: object) =>
    api.t.app.inject({
      method: 'POST',
      url: '/sms/batch',
      headers: { authorization: `Bearer ${carol.token}` },
      payload: { senderName: 'HERALD', body: 'Spring sale', ...body },
    });
  const read = async (queueId: string) => (await carol.get(`/sms/${queueId}`)).json();
  const byNumber = async (queueId: string) =>
    Object.fromEntries(
      (await read(queueId)).recipients.map((r: { recipient: string; status: string; dueAt: string | null }) => [
        r.recipient,
        r.dueAt === null ? r.status : `${r.status} ${r.dueAt}`,
      ]),
    );
  const handed = async (queueId: string) =>
    (await carol.get('/sandbox/sms?limit=1000'))
      .json()
      .messages.filter((m: { queueId: string }) => m.queueId === queueId)
      .map((m: { recipient: string }) => m.recipient)
      .sort();
  const at = async (iso: string) => {
    api.clock.set(Date.parse(iso));
    await api.drain();
  };

  it('refuses deliverInRecipientTimeZone without a scheduleDateTime, or with one that has an offset', async () => {
    const recipients = [{ mobileNo: '919812300001' }];
    const none = await batch({ recipients, deliverInRecipientTimeZone: true });
    assert.equal(none.statusCode, 400, none.body);
    assert.deepEqual(errorFields(none), ['deliverInRecipientTimeZone']);
    for (const scheduleDateTime of ['2027-03-29T10:00:00Z', '2027-03-29T10:00:00+02:00']) {
      const offset = await batch({ recipients, scheduleDateTime, deliverInRecipientTimeZone: true });
      assert.equal(offset.statusCode, 400, offset.body);
      assert.deepEqual(errorFields(offset), ['scheduleDateTime']);
    }
    const single = await api.t.app.inject({
      method: 'POST',
      url: '/sms/single',
      headers: { authorization: `Bearer ${carol.token}` },
      payload: { senderName: 'HERALD', body: 'x', recipient: '919812300001', deliverInRecipientTimeZone: true },
    });
    assert.equal(single.statusCode, 400, 'a passcode has no recipient time zone');
  });

  it("sends at each recipient's time: its timeZone, its country's zone across DST, else the account's", async () => {
    const settings = await api.t.app.inject({
      method: 'PATCH',
      url: '/account',
      headers: { authorization: `Bearer ${carol.token}` },
      payload: { timeZoneOffset: 'UTC-03:00~Brasilia Time' },
    });
    assert.equal(settings.statusCode, 200, settings.body);
    await carol.createProperty('timeZone');
    const list = await carol.createList('Everywhere');
    const contact = (mobileCountryCode: string, mobileNumber: string, timeZone?: string) => ({
      mobileCountryCode,
      mobileNumber,
      mobileOptIn: true,
      ...(timeZone === undefined ? {} : { propertyfields: [{ propertyname: 'timezone', propertyvalue: timeZone }] }),
    });
    await carol.upsert(
      [
        contact('91', '9812300001'), // India, one zone: 10:00 +05:30 is 04:30 UTC
        contact('33', '612345678'), // France: 10:00 in summer time (from the 28th) is 08:00 UTC
        contact('91', '9812300002', 'America/New_York'), // 10:00 EDT is 14:00 UTC
        contact('1', '2025550104'), // the US has many zones: the account's -03:00, 13:00 UTC
      ],
      { listId: list },
    );
    const receiver = await startReceiver();
    try {
      const accepted = await batch({
        listId: [list],
        scheduleDateTime: '2027-03-29T10:00:00',
        deliverInRecipientTimeZone: true,
        webHookUrl: receiver.url,
      });
      assert.equal(accepted.statusCode, 202, accepted.body);
      const queueId = accepted.json().data.QueueId as string;
      // The send starts when the first zone on Earth (+14:00) reaches 10:00: 20:00 UTC the day before.
      assert.equal((await read(queueId)).scheduledAt, '2027-03-28T20:00:00.000Z');
      await at('2027-03-28T19:59:00Z');
      assert.deepEqual(await handed(queueId), []);
      await at('2027-03-28T20:00:00Z');
      assert.deepEqual(await byNumber(queueId), {
        '919812300001': 'Scheduled 2027-03-29T04:30:00.000Z',
        '33612345678': 'Scheduled 2027-03-29T08:00:00.000Z',
        '919812300002': 'Scheduled 2027-03-29T14:00:00.000Z',
        '12025550104': 'Scheduled 2027-03-29T13:00:00.000Z',
      });
      await at('2027-03-29T04:30:00Z');
      assert.deepEqual(await handed(queueId), ['919812300001']);
      await at('2027-03-29T08:00:00Z');
      assert.deepEqual(await handed(queueId), ['33612345678', '919812300001']);
      // The US contact withdraws consent while it waits: decided again when its time comes.
      await carol.upsert([{ mobileCountryCode: '1', mobileNumber: '2025550104', mobileOptIn: false }]);
      await at('2027-03-29T13:00:00Z');
      assert.deepEqual(await handed(queueId), ['33612345678', '919812300001']);
      assert.equal((await byNumber(queueId))['12025550104'], 'NotSent');
      await at('2027-03-29T14:00:00Z');
      assert.deepEqual(await handed(queueId), ['33612345678', '919812300001', '919812300002']);
      assert.equal((await read(queueId)).status, 'Completed');
      const posted = receiver.received
        .flatMap(
          (post) => JSON.parse(post.body).data as Array<{ recipient: string; status: string; errorCode: string }>,
        )
        .filter((event) => event.recipient === '12025550104');
      assert.deepEqual(
        posted.map((event) => [event.status, event.errorCode]),
        [['Failed', 'not_sent']],
        'the refusal is posted as the expansion posts one',
      );
    } finally {
      await receiver.close();
    }
  });

  it('sends at once to a recipient whose time has passed, and holds the rest', async () => {
    const list = await carol.createList('Two');
    await carol.upsert(
      [
        { mobileCountryCode: '91', mobileNumber: '9812300001', mobileOptIn: true }, // 12:00 UTC is 17:30 there
        { mobileCountryCode: '33', mobileNumber: '612345678', mobileOptIn: true }, // 13:00 there
      ],
      { listId: list },
    );
    // 14:00 on each clock today: past in India (08:30 UTC), still ahead in Paris (13:00 UTC, CET).
    const accepted = await batch({
      listId: [list],
      scheduleDateTime: '2027-03-25T14:00:00',
      deliverInRecipientTimeZone: true,
    });
    assert.equal(accepted.statusCode, 202, accepted.body);
    const queueId = accepted.json().data.QueueId as string;
    await api.drain();
    assert.deepEqual(await handed(queueId), ['919812300001']);
    assert.equal((await byNumber(queueId))['33612345678'], 'Scheduled 2027-03-25T13:00:00.000Z');
    await at('2027-03-25T13:00:00Z');
    assert.deepEqual(await handed(queueId), ['33612345678', '919812300001']);
  });
});
