import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import { errorFields } from '../support/app.ts';
import { holdEmailRecipients } from '../../src/email/record.ts';
import { startApiTest, type ApiClient, type ApiTest } from '../support/client.ts';
import { forEachDatabase } from '../support/databases.ts';
import { buildBatch, sandboxEmails } from './support.ts';

// deliverInRecipientTimeZone on /email/batch (ARCHITECTURE.md, "Preflight"): an address has no
// country, so its zone is its contact's timeZone, else the account's offset.

forEachDatabase((dialect) => {
  let api: ApiTest;
  let dora: ApiClient;
  beforeEach(async () => {
    // Thursday 25 March 2027, 12:00 UTC. Paris goes to summer time on Sunday the 28th.
    api = await startApiTest(dialect, { clock: new ManualClock(Date.UTC(2027, 2, 25, 12)) });
    dora = await api.client();
  });
  afterEach(() => api.close());

  const post = (body: object) => dora.post('/email/batch', body);
  const at = async (iso: string) => {
    api.clock.set(Date.parse(iso));
    await api.drain();
  };
  const sentTo = async () => (await sandboxEmails(dora)).map((mail) => mail.to).sort();

  /**
   * A batch at 10:00 on each reader's clock to Ann (Tokyo: 01:00 UTC) and Ben (the account's
   * offset: later), run to 01:00 UTC: Ann's time has come, Ben is held.
   */
  const annInTokyoBenHeld = async () => {
    await dora.createProperty('timeZone');
    const list = await dora.createList('Readers');
    const tokyo = [{ propertyname: 'timeZone', propertyvalue: 'Asia/Tokyo' }];
    await dora.upsert(
      [
        { email: 'ann@example.com', emailOptIn: true, propertyfields: tokyo },
        { email: 'ben@example.com', emailOptIn: true },
      ],
      { listId: list },
    );
    const accepted = await post(
      buildBatch(
        { listId: [list], scheduleDateTime: '2027-03-29T10:00:00', deliverInRecipientTimeZone: true },
        { recipients: undefined },
      ),
    );
    await at('2027-03-29T01:00:00Z');
    return accepted.json().data.BatchId as string;
  };

  /** annInTokyoBenHeld with a relay that refuses Ann for now: her message is Deferred. */
  const annDeferredBenHeld = async () => {
    await api.close();
    api = await startApiTest(dialect, {
      clock: new ManualClock(Date.UTC(2027, 2, 25, 12)),
      env: { EMAIL_TRANSPORT: 'sandbox:?defer=^ann@' },
    });
    dora = await api.client();
    return annInTokyoBenHeld();
  };

  it('refuses deliverInRecipientTimeZone without a scheduleDateTime or with an offset', async () => {
    const none = await post(buildBatch({ deliverInRecipientTimeZone: true }));
    assert.equal(none.statusCode, 400, none.body);
    assert.deepEqual(errorFields(none), ['sendingDetails.deliverInRecipientTimeZone']);
    const offset = await post(
      buildBatch({ deliverInRecipientTimeZone: true, scheduleDateTime: '2027-03-29T10:00:00+01:00' }),
    );
    assert.deepEqual(errorFields(offset), ['sendingDetails.scheduleDateTime']);
  });

  it("sends at the time on each contact's clock, and decides consent again when it comes", async () => {
    const settings = await api.t.app.inject({
      method: 'PATCH',
      url: '/account',
      headers: { authorization: `Bearer ${dora.token}` },
      payload: { timeZoneOffset: 'UTC-03:00~Brasilia Time' },
    });
    assert.equal(settings.statusCode, 200, settings.body);
    await dora.createProperty('timeZone');
    const list = await dora.createList('Readers');
    const reader = (email: string, timeZone?: string) => ({
      email,
      emailOptIn: true,
      ...(timeZone === undefined ? {} : { propertyfields: [{ propertyname: 'timeZone', propertyvalue: timeZone }] }),
    });
    await dora.upsert(
      [
        reader('ann@example.com', 'Asia/Tokyo'), // 10:00 JST is 01:00 UTC
        reader('cal@example.com', 'Europe/Paris'), // 10:00 in summer time is 08:00 UTC
        reader('ben@example.com'), // the account's -03:00: 13:00 UTC
        reader('33612345678@example.com'), // no country in an address, though it reads as a French number
      ],
      { listId: list },
    );
    const accepted = await post(
      buildBatch(
        { listId: [list], scheduleDateTime: '2027-03-29T10:00:00', deliverInRecipientTimeZone: true },
        { recipients: undefined },
      ),
    );
    assert.equal(accepted.statusCode, 202, accepted.body);
    const batchId = accepted.json().data.BatchId as string;
    const due = async () =>
      Object.fromEntries(
        (await dora.get(`/email/batch/${batchId}`))
          .json()
          .recipients.map((r: { email: string; status: string; dueAt: string | null }) => [
            r.email,
            r.dueAt === null ? r.status : `${r.status} ${r.dueAt}`,
          ]),
      );
    await at('2027-03-28T20:00:00Z');
    assert.deepEqual(await due(), {
      '33612345678@example.com': 'Scheduled 2027-03-29T13:00:00.000Z',
      'ann@example.com': 'Scheduled 2027-03-29T01:00:00.000Z',
      'ben@example.com': 'Scheduled 2027-03-29T13:00:00.000Z',
      'cal@example.com': 'Scheduled 2027-03-29T08:00:00.000Z',
    });
    await at('2027-03-29T01:00:00Z');
    assert.deepEqual(await sentTo(), ['ann@example.com']);
    await dora.upsert([{ email: 'cal@example.com', emailOptIn: false }]);
    await at('2027-03-29T08:00:00Z');
    assert.deepEqual(await sentTo(), ['ann@example.com']);
    assert.equal((await due())['cal@example.com'], 'Dropped');
    await at('2027-03-29T13:00:00Z');
    assert.deepEqual(await sentTo(), ['33612345678@example.com', 'ann@example.com', 'ben@example.com']);
    assert.equal((await dora.get(`/email/batch/${batchId}`)).json().status, 'Completed');
  });

  it('refuses to cancel a batch with a message refused for now beside the held ones', async () => {
    const batchId = await annDeferredBenHeld();
    const statuses = (await dora.get(`/email/batch/${batchId}`))
      .json()
      .recipients.map((r: { status: string }) => r.status);
    assert.deepEqual(statuses.sort(), ['Deferred', 'Scheduled']);
    const cancel = await api.t.app.inject({
      method: 'DELETE',
      url: `/email/batch/${batchId}`,
      headers: { authorization: `Bearer ${dora.token}` },
    });
    assert.equal(cancel.statusCode, 409, cancel.body);
  });

  it('retries a message refused for now whose reader moved to a later zone: it went at its time', {
    timeout: 30_000,
  }, async () => {
    const batchId = await annDeferredBenHeld();
    // Ann moves: 10:00 in Los Angeles is 17:00 UTC, hours after her retry is due.
    const la = [{ propertyname: 'timeZone', propertyvalue: 'America/Los_Angeles' }];
    await dora.upsert([{ email: 'ann@example.com', propertyfields: la }]);
    await at('2027-03-29T01:05:00Z');
    const ann = (await dora.get(`/email/batch/${batchId}`))
      .json()
      .recipients.find((r: { email: string }) => r.email === 'ann@example.com');
    assert.deepEqual(
      ann.history.map((h: { event: string }) => h.event),
      ['Scheduled', 'Processed', 'Deferred', 'Deferred'],
      'tried again when due, not held',
    );
  });

  it('sends a recipient released from its hold behind the cursor of a pass stopped halfway', async () => {
    const batchId = await annInTokyoBenHeld();
    assert.deepEqual(await sentTo(), ['ann@example.com']);
    // As a pass stopped after its last page leaves the cursor: past every recipient, Ben's hold behind it.
    const { db } = api.t.ctx;
    const { last } = await db
      .selectFrom('send_recipients')
      .select((eb) => eb.fn.max('id').as('last'))
      .where('send_id', '=', batchId)
      .executeTakeFirstOrThrow();
    await db
      .updateTable('sends')
      .set({ cursor: Number(last) })
      .where('id', '=', batchId)
      .execute();
    await at('2027-03-29T13:00:00Z');
    // The pass finds Ben behind its cursor and starts again from the first, 5 s later.
    await at('2027-03-29T13:00:05Z');
    assert.deepEqual(await sentTo(), ['ann@example.com', 'ben@example.com']);
    assert.equal((await dora.get(`/email/batch/${batchId}`)).json().status, 'Completed');
  });

  it('leaves a recipient an erasure ended while its page was read: the hold writes nothing over it', async () => {
    const accepted = await post(
      buildBatch({ scheduleDateTime: '2027-03-29T10:00:00' }, { recipients: [{ to: 'ann@example.com' }] }),
    );
    const batchId = accepted.json().data.BatchId as string;
    const { db } = api.t.ctx;
    const { id } = await db
      .selectFrom('send_recipients')
      .select('id')
      .where('send_id', '=', batchId)
      .executeTakeFirstOrThrow();
    const erased = await dora.post('/privacy/erasures', { email: 'ann@example.com' });
    assert.equal(erased.statusCode, 202, erased.body);
    // The page's hold, decided from the row as it was read before the erasure.
    await api.t.ctx.database.call(holdEmailRecipients, {
      held: [{ id, dueAt: Date.UTC(2027, 2, 30), reason: 'its own time' }],
      now: api.clock.now(),
    });
    const row = await db
      .selectFrom('send_recipients')
      .select(['status', 'reason', 'due_at'])
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    assert.deepEqual(row, { status: 'Dropped', reason: 'erased', due_at: null });
  });

  it('sends every recipient whose time has come, past a page of them held in part', async () => {
    await dora.createProperty('timeZone');
    const list = await dora.createList('Readers');
    // 600 readers, every other one in Tokyo (10:00 there is 01:00 UTC), the rest on the account's
    // -03:00 (13:00 UTC): the first page of 500 holds half its rows.
    const readers = Array.from({ length: 600 }, (_, i) => ({
      email: `reader${String(i).padStart(3, '0')}@example.com`,
      emailOptIn: true,
      ...(i % 2 === 0 ? { propertyfields: [{ propertyname: 'timeZone', propertyvalue: 'Asia/Tokyo' }] } : {}),
    }));
    await dora.upsert(readers, { listId: list });
    const accepted = await post(
      buildBatch(
        { listId: [list], scheduleDateTime: '2027-03-29T10:00:00', deliverInRecipientTimeZone: true },
        { recipients: undefined },
      ),
    );
    assert.equal(accepted.statusCode, 202, accepted.body);
    await at('2027-03-29T01:00:00Z');
    // Past the first page, held in part, the pass starts again from the first 5 s later.
    await at('2027-03-29T01:00:05Z');
    const { totals } = (await dora.get(`/email/batch/${accepted.json().data.BatchId}?limit=1`)).json();
    assert.deepEqual(totals, { Delivered: 300, Scheduled: 300 }, 'every Tokyo reader at 10:00 Tokyo');
  });
});
