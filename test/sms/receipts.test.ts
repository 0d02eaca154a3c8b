import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { afterEach, beforeEach, it } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import { Worker } from '../../src/queue/worker.ts';
import { SMS_SEND_KIND, SMS_SINGLE_KIND } from '../../src/sms/accept.ts';
import { applyReceipts, matchWaiting, RECEIPT_CLOCK_SKEW_MS, type Receipt } from '../../src/sms/receipts.ts';
import { idReadings } from '../../src/sms/transports/smpp/message-ids.ts';
import { smsSendHandler } from '../../src/sms/send.ts';
import { erasedAddress, erasureKey } from '../../src/messaging/erased-identifiers.ts';
import { recipientZone } from '../../src/messaging/recipient-zone.ts';
import { smsSingleHandler } from '../../src/sms/single.ts';
import { applySmppReceipts } from '../../src/sms/transports/smpp/journal.ts';
import type { SmsTransport } from '../../src/sms/transport.ts';
import { forEachDatabase } from '../support/databases.ts';
import { startApiTest, type ApiClient, type ApiTest } from '../support/client.ts';
import { waitFor } from '../support/wait.ts';

/**
 * Receipts through a transport of the test's own: it accepts every part under an id of its
 * choosing and reports what `receiptsFor` says, either before its results are recorded (as
 * an operator that answers both at once can) or only when the test says.
 */
forEachDatabase((dialect) => {
  let api: ApiTest;
  let alice: ApiClient;
  let worker: Worker;
  let early: (ids: string[]) => Receipt[];
  let pages: string[][];
  let refuseForNow: Set<string>;
  let hold: Promise<void> | undefined;
  let idOf: (recipient: string, part: number) => string;
  let transport: SmsTransport;
  beforeEach(async () => {
    pages = [];
    idOf = (recipient, part) => `op-${recipient}-${part}`;
    hold = undefined;
    refuseForNow = new Set();
    api = await startApiTest(dialect, { clock: new ManualClock(Date.now()) });
    alice = await api.client();
    early = () => [];
    const { database } = api.t.ctx;
    transport = {
      async submit(messages) {
        pages.push(messages.map((m) => m.recipient));
        await hold;
        const ids = messages.map((m) => m.segmented.parts.map((_, i) => idOf(m.recipient, i + 1)));
        const receipts = early(ids.flat());
        if (receipts.length > 0)
          await database.db.transaction().execute((trx) => applyReceipts(trx, dialect, api.clock, { receipts }));
        return messages.map((m, i) =>
          refuseForNow.has(m.recipient)
            ? { accepted: false as const, permanent: false, error: 'throttled', errorCode: '0x58' }
            : { accepted: true as const, operatorMessageIds: ids[i] },
        );
      },
      async close() {},
    };
    worker = new Worker({ database, clock: api.clock });
    worker.register(SMS_SEND_KIND, smsSendHandler({ ...api.t.ctx, transport, zoneOf: recipientZone }), {
      concurrency: 1,
    });
    worker.register(SMS_SINGLE_KIND, smsSingleHandler({ ...api.t.ctx, transport }), { concurrency: 4 });
  });
  afterEach(() => api.close());

  const send = async (recipient: string, body: string) => {
    const response = await alice.post('/sms/single', { recipient, senderName: 'HERALD', body });
    assert.equal(response.statusCode, 202, response.body);
    await worker.drain();
    return response.json().data.QueueId as string;
  };
  const recipientOf = async (queueId: string) => (await alice.get(`/sms/${queueId}`)).json().recipients[0];
  const report = (receipts: Receipt[]) =>
    api.t.ctx.database.db.transaction().execute((trx) => applyReceipts(trx, dialect, api.clock, { receipts }));
  /**
   * A message to `number` Delivered by its receipt under `operatorMessageId`, then that receipt
   * offered again (its answer lost with a connection): its part is final, so it waits.
   */
  const deliveredAndOfferedAgain = async (number: string, operatorMessageId: string) => {
    const first = await send(number, 'hi');
    const delivered: Receipt = {
      smsc: 'default',
      operatorMessageId,
      state: 'DELIVRD',
      errorCode: null,
      recipient: number,
    };
    await report([delivered]);
    assert.equal((await recipientOf(first)).status, 'Delivered');
    await report([delivered]);
    return { first, delivered };
  };

  it(
    'applies a receipt that came before its submit’s result was recorded, and posts its status after the ' +
      'Submitted',
    async () => {
      early = (ids) =>
        ids.map((operatorMessageId) => ({ smsc: 'default', operatorMessageId, state: 'DELIVRD', errorCode: null }));
      const response = await alice.post('/sms/single', {
        recipient: '919812345678',
        senderName: 'HERALD',
        body: 'hi',
        webHookUrl: 'http://127.0.0.1:9/sms',
      });
      await worker.drain();
      const recipient = await recipientOf(response.json().data.QueueId);
      assert.equal(recipient.status, 'Delivered');
      assert.deepEqual(
        recipient.history.map((h: { status: string }) => h.status),
        ['Queued', 'Submitted', 'Delivered'],
      );
      const appended = await api.t.ctx.db.selectFrom('webhook_events').select('events').orderBy('id').execute();
      assert.deepEqual(
        appended.flatMap((row) => JSON.parse(row.events) as Array<{ status: string }>).map((e) => e.status),
        ['Submitted', 'Delivered'],
      );
      assert.equal(
        (await api.t.ctx.db.selectFrom('sms_receipts').selectAll().execute()).length,
        0,
        'no receipt left waiting',
      );
    },
  );

  it('makes a two-part message Delivered only when its last part is, and Failed when a part fails', async () => {
    const delivered = await send('919812345678', 'x'.repeat(161));
    await report([{ smsc: 'default', operatorMessageId: 'op-919812345678-1', state: 'DELIVRD', errorCode: null }]);
    assert.equal((await recipientOf(delivered)).status, 'Submitted');
    await report([{ smsc: 'default', operatorMessageId: 'op-919812345678-2', state: 'DELIVRD', errorCode: null }]);
    assert.equal((await recipientOf(delivered)).status, 'Delivered');

    const failed = await send('919812300001', 'y'.repeat(161));
    await report([{ smsc: 'default', operatorMessageId: 'op-919812300001-1', state: 'ENROUTE', errorCode: null }]);
    assert.equal((await recipientOf(failed)).status, 'Processed');
    await report([{ smsc: 'default', operatorMessageId: 'op-919812300001-2', state: 'UNDELIV', errorCode: '001' }]);
    const recipient = await recipientOf(failed);
    assert.equal(recipient.status, 'Failed');
    assert.deepEqual(
      recipient.partStatus.map((p: { status: string }) => p.status),
      ['Processed', 'Failed'],
    );
  });

  it(
    'keeps a part Delivered when an intermediate receipt for it comes after the final one, whether the part was ' +
      'recorded then or not',
    async () => {
      const recorded = await send('919812345678', 'hi');
      await report([{ smsc: 'default', operatorMessageId: 'op-919812345678-1', state: 'DELIVRD', errorCode: null }]);
      await report([{ smsc: 'default', operatorMessageId: 'op-919812345678-1', state: 'ENROUTE', errorCode: null }]);
      const recipient = await recipientOf(recorded);
      assert.equal(recipient.status, 'Delivered');
      assert.deepEqual(
        recipient.partStatus.map((p: { status: string }) => p.status),
        ['Delivered'],
      );

      early = (ids) =>
        ids.flatMap((operatorMessageId) => [
          { smsc: 'default', operatorMessageId, state: 'DELIVRD', errorCode: null },
          { smsc: 'default', operatorMessageId, state: 'ENROUTE', errorCode: null },
        ]);
      const early2 = await send('919812300002', 'hi');
      assert.equal(
        (await recipientOf(early2)).status,
        'Delivered',
        'a waiting receipt is not undone by a later ENROUTE either',
      );
    },
  );

  it(
    'applies a receipt for an id the SMSC hands out again to the new part, though it comes before that part is ' +
      'recorded, and leaves the old message as it was',
    async () => {
      // The test's transport names a part by its recipient: a second message to the number reuses the id.
      const first = await send('919812345678', 'hi');
      await report([{ smsc: 'default', operatorMessageId: 'op-919812345678-1', state: 'DELIVRD', errorCode: null }]);
      assert.equal((await recipientOf(first)).status, 'Delivered');

      early = (ids) =>
        ids.map((operatorMessageId) => ({ smsc: 'default', operatorMessageId, state: 'UNDELIV', errorCode: '001' }));
      const second = await send('919812345678', 'hi again');
      const reused = await recipientOf(second);
      assert.deepEqual([reused.status, reused.errorCode], ['Failed', '001']);
      const old = await recipientOf(first);
      assert.deepEqual(
        [old.status, old.partStatus.map((p: { status: string }) => p.status)],
        ['Delivered', ['Delivered']],
      );
      assert.equal((await api.t.ctx.db.selectFrom('sms_receipts').selectAll().execute()).length, 0);
    },
  );

  /** The recipient of `queueId` as an erasure leaves it: its number only as its keyed hash. */
  const erase = async (queueId: string, number: string) => {
    const key = await erasureKey(api.t.ctx.db, api.t.ctx.encryptionKey);
    await api.t.ctx.db
      .updateTable('send_recipients')
      .set({ address: erasedAddress(key, number) })
      .where('send_id', '=', queueId)
      .execute();
    return key;
  };
  /** A receipt as the SMPP journal takes it, under every reading of the id: decimal, also read as hex. */
  const smppReceipt = (id: string, number: string, erasure?: Buffer) =>
    api.t.ctx.database.call(applySmppReceipts, {
      now: api.clock.now(),
      receipts: [{ smsc: 'default', readings: idReadings(id), recipient: number, state: 'DELIVRD', errorCode: null }],
      erasureKey: erasure,
    });
  const waiting = () => api.t.ctx.db.selectFrom('sms_receipts').select('recipient').execute();

  it(
    'takes an erased person’s SMPP receipt by their number’s hash and records nothing of it: the number never ' +
      'waits in clear',
    async () => {
      idOf = () => '1234567';
      const queueId = await send('919812345678', 'hi');
      const key = await erase(queueId, '919812345678');
      const events = async () => (await api.t.ctx.db.selectFrom('webhook_events').select('id').execute()).length;
      const before = { recipient: await recipientOf(queueId), events: await events() };
      await smppReceipt('1234567', '919812345678', key);
      assert.deepEqual(await waiting(), []);
      const after = await recipientOf(queueId);
      assert.equal(after.status, 'Submitted');
      assert.deepEqual(after.history, before.recipient.history);
      assert.equal(await events(), before.events);
    },
  );

  it(
    'applies a receipt that names its number to a part of that number only: one offered twice for an earlier ' +
      'message does not end a new part to another number that took its id',
    async () => {
      idOf = (_recipient, part) => `op-shared-${part}`;
      const { first, delivered } = await deliveredAndOfferedAgain('919812300021', 'op-shared-1');

      const second = await send('919812300022', 'hi');
      assert.equal((await recipientOf(second)).status, 'Submitted', 'not ended by the other number’s receipt');
      await report([{ ...delivered, state: 'UNDELIV', errorCode: '001', recipient: '919812300022' }]);
      const own = await recipientOf(second);
      assert.deepEqual([own.status, own.errorCode], ['Failed', '001']);
      assert.equal((await recipientOf(first)).status, 'Delivered');
    },
  );

  it(
    'does not end a new message with a receipt kept from before it was submitted: one offered twice for an ' +
      'earlier message to the same number, whose id the SMSC hands out again',
    async () => {
      // The test's transport names a part by its recipient: a second message to the number reuses the id.
      const { first, delivered } = await deliveredAndOfferedAgain('919812300031', 'op-919812300031-1');
      api.clock.advance(RECEIPT_CLOCK_SKEW_MS + 1_000);
      const second = await send('919812300031', 'hi again');
      assert.equal((await recipientOf(second)).status, 'Submitted', 'not ended by the earlier message’s receipt');
      await report([{ ...delivered, state: 'UNDELIV', errorCode: '001' }]);
      const own = await recipientOf(second);
      assert.deepEqual([own.status, own.errorCode], ['Failed', '001']);
      assert.equal((await recipientOf(first)).status, 'Delivered');
    },
  );

  it('applies a receipt kept before its part’s submit by a clock behind by less than the bound', async () => {
    const behind = new ManualClock(api.clock.now() - RECEIPT_CLOCK_SKEW_MS + 1_000);
    const receipts: Receipt[] = [
      { smsc: 'default', operatorMessageId: 'op-919812300032-1', state: 'DELIVRD', errorCode: null },
    ];
    await api.t.ctx.database.db.transaction().execute((trx) => applyReceipts(trx, dialect, behind, { receipts }));
    assert.equal((await recipientOf(await send('919812300032', 'hi'))).status, 'Delivered');
  });

  it(
    'sends the one-time passcodes claimed together as one page, ' + 'and tries one refused for now again on its own',
    async () => {
      const numbers = ['919812300011', '919812300012', '919812300013'];
      refuseForNow.add(numbers[1]);
      const queueIds: string[] = [];
      for (const recipient of numbers) {
        const response = await alice.post('/sms/single', {
          recipient,
          senderName: 'HERALD',
          body: `code for ${recipient}`,
        });
        assert.equal(response.statusCode, 202, response.body);
        queueIds.push(response.json().data.QueueId);
      }
      await worker.drain();
      assert.deepEqual(pages, [numbers], 'one transport call for the three');
      assert.deepEqual(await Promise.all(queueIds.map(async (id) => (await recipientOf(id)).status)), [
        'Submitted',
        'Queued',
        'Submitted',
      ]);
      assert.deepEqual(await Promise.all(queueIds.map(async (id) => (await alice.get(`/sms/${id}`)).json().status)), [
        'Completed',
        'Queued',
        'Completed',
      ]);

      refuseForNow.clear();
      api.clock.advance(5_000);
      await worker.drain();
      assert.deepEqual(pages.slice(1), [[numbers[1]]], 'only the refused one is sent again');
      assert.equal((await recipientOf(queueIds[1])).status, 'Submitted');
      assert.equal((await alice.get(`/sms/${queueIds[1]}`)).json().status, 'Completed');
    },
  );

  it('fails a passcode refused for now 72 hours after its first refusal, not before', async () => {
    refuseForNow.add('919812300041');
    const queueId = await send('919812300041', 'code 41');
    assert.equal((await recipientOf(queueId)).status, 'Queued');
    api.clock.advance(71 * 3_600_000);
    await worker.drain();
    assert.equal((await recipientOf(queueId)).status, 'Queued', 'still tried after 71 hours');
    api.clock.advance(3_600_000);
    await worker.drain();
    const recipient = await recipientOf(queueId);
    assert.equal(recipient.status, 'Failed');
    assert.equal(recipient.error, 'throttled (refused for now for 72 hours)');
    assert.equal((await alice.get(`/sms/${queueId}`)).json().status, 'Completed');
    assert.equal(pages.length, 3, 'tried at once, after 71 hours and after 72');
  });

  it('counts a campaign’s 72 hours of refusals from its first try, not from its acceptance', async () => {
    refuseForNow.add('919812300042');
    const accepted = await alice.post('/sms/batch', {
      senderName: 'HERALD',
      body: 'sale',
      recipients: [{ mobileNo: '919812300042' }],
      scheduleDateTime: new Date(api.clock.now() + 100 * 3_600_000).toISOString(),
    });
    assert.equal(accepted.statusCode, 202, accepted.body);
    const queueId = accepted.json().data.QueueId as string;
    api.clock.advance(100 * 3_600_000);
    await worker.drain();
    assert.equal(pages.length, 1, 'tried when due');
    assert.equal((await recipientOf(queueId)).status, 'Queued', 'refused for now at its first try');
    api.clock.advance(72 * 3_600_000);
    await worker.drain();
    assert.equal((await recipientOf(queueId)).status, 'Failed');
    assert.equal((await alice.get(`/sms/${queueId}`)).json().status, 'Completed');
  });

  for (const path of ['/sms/single', '/sms/batch'])
    it(`ends NotSent a ${path} message refused for now whose number was suppressed before its next try`, async () => {
      const number = '919812300043';
      refuseForNow.add(number);
      const to = path === '/sms/single' ? { recipient: number } : { recipients: [{ mobileNo: number }] };
      const accepted = await alice.post(path, {
        ...to,
        senderName: 'HERALD',
        body: 'code 43',
        webHookUrl: 'http://127.0.0.1:9/sms',
      });
      assert.equal(accepted.statusCode, 202, accepted.body);
      const queueId = accepted.json().data.QueueId as string;
      await worker.drain();
      assert.equal((await recipientOf(queueId)).status, 'Queued', 'refused for now');
      // The person answers STOP (a suppression) while the SMSC refuses; then the SMSC would take it.
      const stop = await alice.post('/sms/suppressions', { number, reason: 'STOP' });
      assert.equal(stop.statusCode, 201, stop.body);
      refuseForNow.clear();
      api.clock.advance(5_000);
      await worker.drain();
      assert.deepEqual(pages, [[number]], 'tried once, not again');
      assert.equal((await recipientOf(queueId)).status, 'NotSent');
      assert.equal((await alice.get(`/sms/${queueId}`)).json().status, 'Completed');
      const posted = await api.t.ctx.db.selectFrom('webhook_events').select('events').orderBy('id').execute();
      assert.deepEqual(
        posted
          .flatMap((row) => JSON.parse(row.events) as Array<{ status: string; errorCode: string | null }>)
          .map((event) => `${event.status} ${event.errorCode}`),
        ['Failed not_sent'],
      );
    });

  it('never hands an SMSC a Verify code refused for now once the code has expired', async () => {
    const number = '919812300044';
    refuseForNow.add(number);
    const started = await alice.post('/verify', { to: number, ttlSeconds: 60 });
    assert.equal(started.statusCode, 201, started.body);
    await worker.drain();
    const recipient = () =>
      api.t.ctx.db.selectFrom('send_recipients').select(['status', 'error']).executeTakeFirstOrThrow();
    assert.equal((await recipient()).status, 'Queued', 'refused for now');
    api.clock.advance(30_000);
    await worker.drain();
    assert.equal(pages.length, 2, 'tried again while the code lives');
    refuseForNow.clear();
    api.clock.advance(30_000);
    await worker.drain();
    assert.equal(pages.length, 2, 'not handed over once the code expired');
    assert.deepEqual(await recipient(), {
      status: 'Failed',
      error: 'not sent: its code expired before an SMSC took it',
    });
  });

  /** Passcodes to `numbers`, accepted, then their page held at the transport until `held` resolves. */
  const passcodesHeld = async (numbers: string[]) => {
    const queueIds: string[] = [];
    for (const recipient of numbers) {
      const response = await alice.post('/sms/single', {
        recipient,
        senderName: 'HERALD',
        body: 'Your code is 1',
        webHookUrl: 'http://127.0.0.1:9/sms',
      });
      assert.equal(response.statusCode, 202, response.body);
      queueIds.push(response.json().data.QueueId);
    }
    const held = Promise.withResolvers<void>();
    hold = held.promise;
    const sending = worker.drain();
    await waitFor('the page handed over', async () => pages.length > 0 || undefined);
    const [job] = await api.t.ctx.db
      .selectFrom('jobs')
      .select('id')
      .where('kind', '=', SMS_SINGLE_KIND)
      .orderBy('id')
      .limit(1)
      .execute();
    return { queueIds, held, sending, firstJob: job.id };
  };

  it('records a page of passcodes whole though one of its jobs lost its lease meanwhile', async () => {
    const numbers = ['919812300001', '919812300002'];
    const { queueIds, held, sending, firstJob } = await passcodesHeld(numbers);
    // Its lease lapsed, and another worker took the first job over.
    await api.t.ctx.db.updateTable('jobs').set({ lease_token: 'another-worker' }).where('id', '=', firstJob).execute();
    held.resolve();
    await sending;
    assert.deepEqual(pages, [numbers]);
    for (const queueId of queueIds) assert.equal((await recipientOf(queueId)).status, 'Submitted');
    // The job taken over runs again once its lease lapses: nothing of it is left to send.
    await api.t.ctx.db.updateTable('jobs').set({ lease_expires_at: 0 }).where('id', '=', firstJob).execute();
    await worker.drain();
    api.clock.advance(10_000);
    await worker.drain();
    assert.deepEqual(pages, [numbers], 'sent once');
    assert.deepEqual(
      await api.t.ctx.db.selectFrom('jobs').select('id').where('kind', '=', SMS_SINGLE_KIND).execute(),
      [],
    );
  });

  it('records a passcode once though another worker sent it again meanwhile, and the rest of its page', async () => {
    const numbers = ['919812300011', '919812300012'];
    const { queueIds, held, sending, firstJob } = await passcodesHeld(numbers);
    hold = undefined;
    // The first job's lease lapsed, and another worker took it over and sent its passcode.
    await api.t.ctx.db.updateTable('jobs').set({ lease_expires_at: 0 }).where('id', '=', firstJob).execute();
    const another = new Worker({ database: api.t.ctx.database, clock: api.clock });
    another.register(SMS_SINGLE_KIND, smsSingleHandler({ ...api.t.ctx, transport }), {
      concurrency: 4,
    });
    await another.drain();
    api.clock.advance(10_000);
    await another.drain();
    held.resolve();
    await sending;
    api.clock.advance(10_000);
    await worker.drain();
    assert.deepEqual(pages, [numbers, [numbers[0]]], 'the second passcode sent once');
    for (const queueId of queueIds) {
      const recipient = await recipientOf(queueId);
      assert.deepEqual(
        recipient.history.map((h: { status: string }) => h.status),
        ['Queued', 'Submitted'],
      );
    }
    const appended = await api.t.ctx.db.selectFrom('webhook_events').select('events').execute();
    assert.deepEqual(
      appended.flatMap((row) => JSON.parse(row.events) as Array<{ status: string }>).map((e) => e.status),
      ['Submitted', 'Submitted'],
      'one status a passcode',
    );
  });

  it('stops a batch run at the page it records after its lease lapsed: the rest goes once', async () => {
    const numbers = Array.from({ length: 600 }, (_, i) => `9198123${String(i).padStart(5, '0')}`);
    const accepted = await alice.post('/sms/batch', {
      senderName: 'HERALD',
      body: 'sale',
      recipients: numbers.map((mobileNo) => ({ mobileNo })),
    });
    assert.equal(accepted.statusCode, 202, accepted.body);
    const held = Promise.withResolvers<void>();
    hold = held.promise;
    const sending = worker.drain();
    await waitFor('the first page handed over', async () => pages.length > 0 || undefined);
    // Its lease lapsed, and another worker took the job over.
    await api.t.ctx.db
      .updateTable('jobs')
      .set({ lease_token: 'another-worker' })
      .where('kind', '=', SMS_SEND_KIND)
      .execute();
    held.resolve();
    await sending;
    assert.equal(pages.length, 1, 'the second page is not handed over beside the worker that holds the job');
    // The job taken over runs again once its lease lapses: the unrecorded page, then the rest.
    await api.t.ctx.db.updateTable('jobs').set({ lease_expires_at: 0 }).where('kind', '=', SMS_SEND_KIND).execute();
    await worker.drain();
    api.clock.advance(10_000);
    await worker.drain();
    assert.deepEqual(
      pages.map((page) => page.length),
      [500, 500, 100],
      'the page whose record was undone twice',
    );
  });

  it(
    'refuses to cancel a one-time passcode its worker has taken ' + '(409), though its send still reads Queued',
    async () => {
      let release!: () => void;
      hold = new Promise((resolve) => (release = resolve));
      const response = await alice.post('/sms/single', {
        recipient: '919812300021',
        senderName: 'HERALD',
        body: 'code 1',
      });
      const queueId = response.json().data.QueueId as string;
      const draining = worker.drain();
      await waitFor('the passcode at the transport', async () => (pages.length > 0 ? true : undefined));
      assert.equal((await alice.get(`/sms/${queueId}`)).json().status, 'Queued');
      const cancel = await api.t.app.inject({
        method: 'DELETE',
        url: `/sms/${queueId}`,
        headers: { authorization: `Bearer ${alice.token}` },
      });
      assert.equal(cancel.statusCode, 409, cancel.body);
      release();
      await draining;
      assert.equal((await recipientOf(queueId)).status, 'Submitted');
    },
  );

  // PostgreSQL's transactions run side by side, each blind to the other's uncommitted rows;
  // SQLite's one writer takes them in turn, so these interleavings cannot happen there.
  if (dialect === 'postgres') {
    /** Runs `work` in a transaction that commits only once `commit` is called. */
    const held = <T>(work: (trx: typeof api.t.ctx.db) => Promise<T>) => {
      let commit!: () => void;
      const release = new Promise<void>((resolve) => (commit = resolve));
      let ran!: (value: T) => void;
      const done = new Promise<T>((resolve) => (ran = resolve));
      const committed = api.t.ctx.database.db.transaction().execute(async (trx) => {
        ran(await work(trx));
        await release;
      });
      return {
        done,
        commit: async () => {
          commit();
          await committed;
        },
      };
    };
    const deliveredEvents = async () =>
      (await api.t.ctx.db.selectFrom('webhook_events').select('events').execute())
        .flatMap((row) => JSON.parse(row.events) as Array<{ status: string }>)
        .filter((e) => e.status === 'Delivered').length;
    /** Until a statement waits for a lock, or `other` has settled without waiting for one. */
    const waitingForLock = async (other: Promise<unknown>) => {
      let settled = false;
      void other.finally(() => (settled = true));
      const lockWaits = async () =>
        (
          await sql<{ n: number }>`
        select count(*)::int as n from pg_stat_activity
         where datname = current_database() and wait_event_type = 'Lock'`.execute(api.t.ctx.db)
        ).rows[0].n;
      await waitFor('a statement waiting for a lock', async () => settled || (await lockWaits()) > 0 || undefined);
    };

    it(
      'applies, once, a receipt written while its part was being recorded, though neither transaction saw the ' +
        'other’s row',
      async () => {
        const queueId = await alice.post('/sms/single', {
          recipient: '919812345678',
          senderName: 'HERALD',
          body: 'hi',
          webHookUrl: 'http://127.0.0.1:9/sms',
        });
        await worker.drain();
        const id = 'op-919812345678-1';
        const key = { smsc: 'default', operatorMessageId: id };
        const part = await api.t.ctx.db
          .selectFrom('sms_parts')
          .selectAll()
          .where('operator_message_id', '=', id)
          .executeTakeFirstOrThrow();
        await api.t.ctx.db.deleteFrom('sms_parts').where('operator_message_id', '=', id).execute();

        const page = held(async (trx) => {
          await trx.insertInto('sms_parts').values(part).execute();
          return applyReceipts(trx, dialect, api.clock, { receipts: [], parts: [key] });
        });
        assert.deepEqual(await page.done, [key], 'the page left its part waiting');
        const receiptWaiting = await report([
          { smsc: 'default', operatorMessageId: id, state: 'DELIVRD', errorCode: null },
        ]);
        assert.deepEqual(receiptWaiting, [key], 'the receipt saw no part');
        await matchWaiting(api.t.ctx.db, dialect, api.clock.now(), receiptWaiting);
        assert.equal(
          (await recipientOf(queueId.json().data.QueueId)).status,
          'Submitted',
          'nothing applied while the part is uncommitted',
        );
        await page.commit();
        await Promise.all([
          matchWaiting(api.t.ctx.db, dialect, api.clock.now(), [key]),
          matchWaiting(api.t.ctx.db, dialect, api.clock.now(), [key]),
        ]);

        const recipient = await recipientOf(queueId.json().data.QueueId);
        assert.deepEqual(
          recipient.history.map((h: { status: string }) => h.status),
          ['Queued', 'Submitted', 'Delivered'],
        );
        assert.equal(await deliveredEvents(), 1, 'one webhook event');
        assert.equal((await api.t.ctx.db.selectFrom('sms_receipts').selectAll().execute()).length, 0);
      },
    );

    it('ends a two-part message Delivered when its parts’ receipts are applied side by side', async () => {
      const queueId = await send('919812345678', 'x'.repeat(161));
      const first = held((trx) =>
        applyReceipts(trx, dialect, api.clock, {
          receipts: [{ smsc: 'default', operatorMessageId: 'op-919812345678-1', state: 'DELIVRD', errorCode: null }],
        }),
      );
      await first.done;
      const second = report([
        { smsc: 'default', operatorMessageId: 'op-919812345678-2', state: 'DELIVRD', errorCode: null },
      ]);
      await waitingForLock(second);
      await first.commit();
      await second;
      const recipient = await recipientOf(queueId);
      assert.equal(recipient.status, 'Delivered');
      assert.deepEqual(
        recipient.partStatus.map((p: { status: string }) => p.status),
        ['Delivered', 'Delivered'],
      );
    });
  }

  it('leaves other messages alone when a receipt that matches nothing yet reads as their ids', async () => {
    const ids: Record<string, string> = { '919812300001': '64', '919812300002': '256', '919812300003': '100' };
    idOf = (recipient) => ids[recipient];
    const others = [await send('919812300001', 'hi'), await send('919812300002', 'hi')];
    // `100` as written, and as hex (256) and as decimal written in hex (64): the SMSC's id for the third.
    const unmatched = await api.t.ctx.database.call(applySmppReceipts, {
      now: api.clock.now(),
      receipts: [
        {
          smsc: 'default',
          recipient: '919812300003',
          readings: ['100', '64', '256'],
          state: 'UNDELIV',
          errorCode: '1',
        },
      ],
    });
    assert.deepEqual(unmatched, { default: 1 });
    for (const queueId of others) assert.equal((await recipientOf(queueId)).status, 'Submitted');
    // Its own part, recorded later, takes it.
    const own = await send('919812300003', 'hi');
    assert.equal((await recipientOf(own)).status, 'Failed');
    for (const queueId of others) assert.equal((await recipientOf(queueId)).status, 'Submitted');
  });

  it('keeps a receipt for an id it does not know, without failing', async () => {
    await report([{ smsc: 'default', operatorMessageId: 'never-submitted', state: 'DELIVRD', errorCode: null }]);
    assert.deepEqual(
      (await api.t.ctx.db.selectFrom('sms_receipts').select('operator_message_id').execute()).map(
        (r) => r.operator_message_id,
      ),
      ['never-submitted'],
    );
  });
});
