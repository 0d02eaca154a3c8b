import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import { recipientZone } from '../../src/messaging/recipient-zone.ts';
import { Worker } from '../../src/queue/worker.ts';
import { SMS_SEND_KIND } from '../../src/sms/accept.ts';
import { smsSendHandler } from '../../src/sms/send.ts';
import type { SmsTransport } from '../../src/sms/transport.ts';
import { startApiTest, type ApiClient, type ApiTest } from '../support/client.ts';
import { forEachDatabase } from '../support/databases.ts';
import { startReceiver } from '../webhooks/support.ts';

// Quiet hours (ARCHITECTURE.md, "Preflight"): PATCH /account {quietHours}, and a batch SMS held
// until the window ends in its recipient's zone.

forEachDatabase((dialect) => {
  let api: ApiTest;
  let alice: ApiClient;
  beforeEach(async () => {
    // Thursday 15 January 2026, 22:00 UTC: 23:00 in Paris.
    api = await startApiTest(dialect, { clock: new ManualClock(Date.UTC(2026, 0, 15, 22)) });
    alice = await api.client();
  });
  afterEach(() => api.close());

  const patch = (client: ApiClient, payload: object) =>
    api.t.app.inject({
      method: 'PATCH',
      url: '/account',
      headers: { authorization: `Bearer ${client.token}` },
      payload,
    });

  it('keeps quiet hours off until set, shows them in GET /account, and turns them off with null', async () => {
    assert.equal((await alice.get('/account')).json().quietHours, null);
    const set = await patch(alice, { quietHours: { start: '21:00', end: '08:00' } });
    assert.equal(set.statusCode, 200, set.body);
    assert.deepEqual(set.json().quietHours, { start: '21:00', end: '08:00' });
    assert.deepEqual((await alice.get('/account')).json().quietHours, { start: '21:00', end: '08:00' });
    assert.deepEqual((await patch(alice, { smartEncoding: false })).json().quietHours, {
      start: '21:00',
      end: '08:00',
    });
    assert.deepEqual((await patch(alice, { quietHours: { start: '12:00', end: '14:00' } })).json().quietHours, {
      start: '12:00',
      end: '14:00',
    });
    assert.equal((await patch(alice, { quietHours: null })).json().quietHours, null);
    assert.equal((await alice.get('/account')).json().quietHours, null);
  });

  it('refuses quiet hours that are no window of the day with 400, and keeps the ones set', async () => {
    await patch(alice, { quietHours: { start: '21:00', end: '08:00' } });
    const refused: unknown[] = [
      { start: '21:00' },
      { start: '21:00', end: '21:00' },
      { start: '24:00', end: '08:00' },
      { start: '9:00', end: '17:00' },
      { start: '21:00', end: '08:60' },
      { start: '21:00:00', end: '08:00' },
      { start: 2100, end: 800 },
      { start: '21:00', end: '08:00', days: 'weekdays' },
      'nightly',
    ];
    for (const quietHours of refused) {
      const answer = await patch(alice, { quietHours });
      assert.equal(answer.statusCode, 400, `${JSON.stringify(quietHours)}: ${answer.body}`);
    }
    const late = (await patch(alice, { quietHours: { start: '24:00', end: '08:00' } })).json();
    assert.deepEqual(late.errors[0], {
      field: 'quietHours.start',
      message: 'must be a time of day as HH:MM, 00:00 to 23:59',
    });
    const same = (await patch(alice, { quietHours: { start: '21:00', end: '21:00' } })).json();
    assert.deepEqual(
      same.errors.map((e: { field: string }) => e.field),
      ['quietHours.end'],
    );
    assert.deepEqual((await alice.get('/account')).json().quietHours, { start: '21:00', end: '08:00' });
  });
});

forEachDatabase((dialect) => {
  let api: ApiTest;
  let alice: ApiClient;
  beforeEach(async () => {
    api = await startApiTest(dialect, { clock: new ManualClock(Date.UTC(2026, 0, 15, 22)) });
    alice = await api.client();
  });
  afterEach(() => api.close());

  const FRENCH = '33612345678';
  const AMERICAN = '12025550143';
  const MINUTE = 60_000;
  const settings = (client: ApiClient, payload: object) =>
    api.t.app.inject({
      method: 'PATCH',
      url: '/account',
      headers: { authorization: `Bearer ${client.token}` },
      payload,
    });
  const nightly = async (client: ApiClient, more: object = {}) => {
    const answer = await settings(client, { quietHours: { start: '21:00', end: '08:00' }, ...more });
    assert.equal(answer.statusCode, 200, answer.body);
  };
  const batch = (client: ApiClient, body: object) =>
    client.accept('/sms/batch', { senderName: 'HERALD', body: 'Spring sale', ...body });
  const read = async (client: ApiClient, queueId: string) => (await client.get(`/sms/${queueId}`)).json();
  const byNumber = (sent: { recipients: Array<{ recipient: string }> }) =>
    new Map(sent.recipients.map((r) => [r.recipient, r as Record<string, unknown> & { recipient: string }]));
  /** The numbers the sandbox took a message of the send for. */
  const handed = async (client: ApiClient, queueId: string) =>
    (await client.get('/sandbox/sms?limit=1000'))
      .json()
      .messages.filter((m: { queueId: string }) => m.queueId === queueId)
      .map((m: { recipient: string }) => m.recipient)
      .sort();

  it('holds a batch SMS inside quiet hours until they end, and sends it then', async () => {
    await nightly(alice);
    const queueId = await batch(alice, { recipients: [{ mobileNo: FRENCH }] });
    await api.drain();
    let sent = await read(alice, queueId);
    assert.equal(sent.status, 'Sending');
    assert.deepEqual(sent.totals, { Scheduled: 1 });
    const [held] = sent.recipients;
    assert.deepEqual(
      [held.status, held.reason, held.dueAt, held.messageId],
      ['Scheduled', 'quiet hours', '2026-01-16T07:00:00.000Z', null],
      '08:00 in Paris',
    );
    assert.deepEqual(
      held.history.map((h: { status: string }) => h.status),
      ['Queued', 'Scheduled'],
    );
    assert.deepEqual(await handed(alice, queueId), []);
    assert.equal((await alice.get(`/sms/${queueId}?status=Scheduled`)).json().recipients.length, 1);
    assert.equal((await alice.get(`/sms/${queueId}?status=Queued`)).json().recipients.length, 0);

    // A minute before the end it still waits; at the end it goes.
    api.clock.set(Date.UTC(2026, 0, 16, 7) - MINUTE);
    await api.drain();
    assert.deepEqual(await handed(alice, queueId), []);
    api.clock.set(Date.UTC(2026, 0, 16, 7));
    await api.drain();
    assert.deepEqual(await handed(alice, queueId), [FRENCH]);
    sent = await read(alice, queueId);
    assert.equal(sent.status, 'Completed');
    const [released] = sent.recipients;
    assert.equal(released.status, 'Delivered');
    assert.deepEqual([released.reason, released.dueAt], [null, null]);
    assert.deepEqual(
      released.history.map((h: { status: string }) => h.status),
      ['Queued', 'Scheduled', 'Submitted', 'Delivered'],
    );
  });

  it('never holds /sms/single, sent now or scheduled, nor a Verify code', async () => {
    await nightly(alice);
    const now = await alice.accept('/sms/single', { recipient: FRENCH, senderName: 'HERALD', body: 'Code 1234' });
    const later = await alice.accept('/sms/single', {
      recipient: FRENCH,
      senderName: 'HERALD',
      body: 'Code 5678',
      scheduleDateTime: '2026-01-15T23:30:00Z',
    });
    const verification = await alice.post('/verify', { to: FRENCH });
    assert.equal(verification.statusCode, 201, verification.body);
    await api.drain();
    const waiting = (await read(alice, later)).recipients[0];
    assert.deepEqual([waiting.status, waiting.dueAt], ['Scheduled', '2026-01-15T23:30:00.000Z'], 'its schedule');
    api.clock.set(Date.UTC(2026, 0, 15, 23, 30));
    await api.drain();
    for (const queueId of [now, later]) {
      assert.deepEqual(await handed(alice, queueId), [FRENCH]);
      assert.equal((await read(alice, queueId)).recipients[0].status, 'Delivered');
    }
    const texts = (await alice.get('/sandbox/sms')).json().messages.map((m: { text: string }) => m.text);
    assert.equal(texts.length, 3, 'both singles and the Verify code went at 23:00 and 00:30 in Paris');
  });

  it("takes each recipient's zone: its timeZone, its country's one zone across DST, else the account's", async () => {
    // Saturday 28 March 2026, 20:30 UTC; Paris goes to summer time at 01:00 UTC.
    api.clock.set(Date.UTC(2026, 2, 28, 20, 30));
    const carol = await api.client(); // a token of that day
    await nightly(carol, { timeZoneOffset: 'UTC+05:30~India Standard Time' });
    await carol.createProperty('timeZone');
    const list = await carol.createList('Everywhere');
    const contact = (mobileCountryCode: string, mobileNumber: string, timeZone?: string) => ({
      mobileCountryCode,
      mobileNumber,
      mobileOptIn: true,
      ...(timeZone === undefined ? {} : { propertyfields: [{ propertyname: 'TimeZone', propertyvalue: timeZone }] }),
    });
    await carol.upsert(
      [
        contact('1', '2025550101', 'Asia/Tokyo'), // 05:30 there: held until 08:00, 23:00 UTC
        contact('1', '2025550102', 'america/new_york'), // 16:30 there: sent now
        contact('1', '2025550103', 'Not/AZone'), // the account's +05:30 (02:00): held until 02:30 UTC
        contact('1', '2025550104'), // the US has many zones: the account's +05:30 too
        contact('33', '612345678'), // Paris, 21:30: held until 08:00 summer time, 06:00 UTC
      ],
      { listId: list },
    );
    const queueId = await batch(carol, { listId: [list] });
    await api.drain();
    const due = async () =>
      Object.fromEntries([...byNumber(await read(carol, queueId))].map(([number, r]) => [number, r.dueAt ?? r.status]));
    assert.deepEqual(await due(), {
      '12025550101': '2026-03-28T23:00:00.000Z',
      '12025550102': 'Delivered',
      '12025550103': '2026-03-29T02:30:00.000Z',
      '12025550104': '2026-03-29T02:30:00.000Z',
      '33612345678': '2026-03-29T06:00:00.000Z',
    });
    // The send's job wakes at the earliest end, sends those due, and sleeps until the next.
    api.clock.set(Date.UTC(2026, 2, 28, 23));
    await api.drain();
    assert.deepEqual(await handed(carol, queueId), ['12025550101', '12025550102']);
    api.clock.set(Date.UTC(2026, 2, 29, 2, 30));
    await api.drain();
    assert.deepEqual(await handed(carol, queueId), ['12025550101', '12025550102', '12025550103', '12025550104']);
    api.clock.set(Date.UTC(2026, 2, 29, 6));
    await api.drain();
    assert.equal((await handed(carol, queueId)).length, 5);
    assert.equal((await read(carol, queueId)).status, 'Completed');
  });

  it('holds within a window of the day that does not cross midnight', async () => {
    api.clock.set(Date.UTC(2026, 0, 15, 12, 30));
    await settings(alice, { quietHours: { start: '12:00', end: '14:00' } });
    const queueId = await batch(alice, { recipients: [{ mobileNo: AMERICAN }] });
    await api.drain();
    assert.equal((await read(alice, queueId)).recipients[0].dueAt, '2026-01-15T14:00:00.000Z');
    api.clock.set(Date.UTC(2026, 0, 15, 14));
    await api.drain();
    assert.deepEqual(await handed(alice, queueId), [AMERICAN]);
  });

  it('cancels the recipients still held, completes the send, and sends them nothing later', async () => {
    // 17:00 at the account's UTC-05:00 for the American; 23:00 in Paris.
    await nightly(alice, { timeZoneOffset: 'UTC-05:00~Eastern Standard Time' });
    const receiver = await startReceiver();
    const queueId = await batch(alice, {
      recipients: [{ mobileNo: AMERICAN }, { mobileNo: FRENCH }],
      webHookUrl: receiver.url,
    });
    await api.drain();
    assert.deepEqual(await handed(alice, queueId), [AMERICAN]);
    const cancel = () =>
      api.t.app.inject({
        method: 'DELETE',
        url: `/sms/${queueId}`,
        headers: { authorization: `Bearer ${alice.token}` },
      });
    const bob = await api.client();
    const notHis = await api.t.app.inject({
      method: 'DELETE',
      url: `/sms/${queueId}`,
      headers: { authorization: `Bearer ${bob.token}` },
    });
    assert.equal(notHis.statusCode, 404);
    assert.equal((await cancel()).statusCode, 204);
    const sent = await read(alice, queueId);
    assert.equal(sent.status, 'Completed');
    assert.deepEqual(sent.totals, { Delivered: 1, Cancelled: 1 });
    const french = byNumber(sent).get(FRENCH)!;
    assert.deepEqual([french.status, french.dueAt], ['Cancelled', null]);
    assert.deepEqual(
      (french.history as Array<{ status: string }>).map((h) => h.status),
      ['Queued', 'Scheduled', 'Cancelled'],
    );
    assert.equal((await cancel()).statusCode, 409, 'nothing left to cancel');
    api.clock.set(Date.UTC(2026, 0, 16, 12));
    await api.drain();
    assert.deepEqual(await handed(alice, queueId), [AMERICAN]);
    // Held and Cancelled are read, never posted: the webhook has the American's statuses alone.
    api.clock.advance(1000);
    await api.drain();
    await receiver.close();
    const events = receiver.received.flatMap((post) => JSON.parse(post.body).data as Array<Record<string, string>>);
    assert.deepEqual(
      events.map((e) => [e.recipient, e.status]),
      [
        [AMERICAN, 'Submitted'],
        [AMERICAN, 'Delivered'],
      ],
    );
  });

  it("holds by the sending account's quiet hours alone: another account's sends go", async () => {
    await nightly(alice);
    const bob = await api.client();
    const hers = await batch(alice, { recipients: [{ mobileNo: FRENCH }] });
    const his = await batch(bob, { recipients: [{ mobileNo: FRENCH }] });
    await api.drain();
    assert.deepEqual(await handed(alice, hers), []);
    assert.deepEqual(await handed(bob, his), [FRENCH]);
    assert.equal((await bob.get('/account')).json().quietHours, null);
    assert.equal((await bob.get(`/sms/${hers}`)).statusCode, 404);
  });
});

forEachDatabase((dialect) => {
  let api: ApiTest;
  let alice: ApiClient;
  let worker: Worker;
  beforeEach(async () => {
    // 20:57 in Paris: the campaign's first page goes before 21:00, its second after.
    api = await startApiTest(dialect, { clock: new ManualClock(Date.UTC(2026, 0, 15, 19, 57)) });
    alice = await api.client();
    // Each page takes the operator five minutes.
    const transport: SmsTransport = {
      async submit(messages) {
        api.clock.advance(5 * 60_000);
        return messages.map((m) => ({ accepted: true as const, operatorMessageIds: [`op-${m.messageId}`] }));
      },
      async close() {},
    };
    worker = new Worker({ database: api.t.ctx.database, clock: api.clock });
    worker.register(SMS_SEND_KIND, smsSendHandler({ ...api.t.ctx, transport, zoneOf: recipientZone }));
  });
  afterEach(() => api.close());

  it('checks quiet hours as each page is handed over: a campaign crossing 21:00 holds its later pages', async () => {
    const answer = await api.t.app.inject({
      method: 'PATCH',
      url: '/account',
      headers: { authorization: `Bearer ${alice.token}` },
      payload: { quietHours: { start: '21:00', end: '08:00' } },
    });
    assert.equal(answer.statusCode, 200);
    const recipients = Array.from({ length: 600 }, (_, i) => ({ mobileNo: `336123${String(i).padStart(5, '0')}` }));
    const queueId = await alice.accept('/sms/batch', { senderName: 'HERALD', body: 'Sale', recipients });
    await worker.drain();
    const sent = (await alice.get(`/sms/${queueId}?limit=1000`)).json();
    assert.deepEqual(sent.totals, { Submitted: 500, Scheduled: 100 });
    const held = sent.recipients.filter((r: { status: string }) => r.status === 'Scheduled');
    assert.deepEqual([...new Set(held.map((r: { dueAt: string }) => r.dueAt))], ['2026-01-16T07:00:00.000Z']);
    assert.deepEqual(
      held.map((r: { recipient: string }) => r.recipient),
      recipients.slice(500).map((r) => r.mobileNo),
      'the second page, in id order',
    );
  });
});
