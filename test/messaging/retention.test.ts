import assert from 'node:assert/strict';
import type { LightMyRequestResponse } from 'fastify';
import { afterEach, beforeEach, it } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import { purgeSendsChunk, RETENTION_EVERY_MS, RETENTION_KIND, sweep } from '../../src/messaging/retention.ts';
import { enqueue } from '../../src/queue/queue.ts';
import { Worker } from '../../src/queue/worker.ts';
import { SMS_SEND_KIND, SMS_SINGLE_KIND } from '../../src/sms/accept.ts';
import { applyReceipts } from '../../src/sms/receipts.ts';
import { smsSendHandler } from '../../src/sms/send.ts';
import { recipientZone } from '../../src/messaging/recipient-zone.ts';
import { smsSingleHandler } from '../../src/sms/single.ts';
import type { SmsTransport } from '../../src/sms/transport.ts';
import { sandboxTransport } from '../../src/sms/transports/sandbox.ts';
import { DELIVER_KIND, emitWebhook } from '../../src/webhooks/outbox.ts';
import { createWorker } from '../../src/server/worker.ts';
import { startReceiver, type Receiver } from '../webhooks/support.ts';
import { forEachDatabase } from '../support/databases.ts';
import { bearer } from '../support/app.ts';
import { startApiTest, type ApiTest } from '../support/client.ts';
import { waitFor } from '../support/wait.ts';
import { INBOUND_PURGES } from '../../src/sms/inbound.ts';
import { SMS_PURGES } from '../../src/sms/receipts.ts';

const DAY = 24 * 60 * 60_000;
const HOUR = 60 * 60_000;
const START = Date.UTC(2026, 0, 1, 12);
/** The sandbox takes every number but this one, which it refuses for now: its send stays Sending. */
const REFUSED_FOR_NOW = '919812399999';

/** An account's requests, under a token that outlives the weeks these tests move the clock through. */
interface Client {
  accountId: string;
  get(url: string): Promise<LightMyRequestResponse>;
  post(url: string, payload?: object, headers?: Record<string, string>): Promise<LightMyRequestResponse>;
  delete(url: string): Promise<LightMyRequestResponse>;
}

forEachDatabase((dialect) => {
  let api: ApiTest;
  let alice: Client;
  const client = async (): Promise<Client> => {
    const account = await api.t.createAccount();
    const auth = bearer(await api.t.tokenFor(account, 'LongLive'));
    const inject = (
      method: 'GET' | 'POST' | 'DELETE',
      url: string,
      payload?: object,
      headers: Record<string, string> = {},
    ) => api.t.app.inject({ method, url, payload, headers: { ...auth, ...headers } });
    return {
      accountId: account.row.id,
      get: (url) => inject('GET', url),
      post: (url, payload, headers) => inject('POST', url, payload, headers),
      delete: (url) => inject('DELETE', url),
    };
  };
  let sendingWorker: Worker;
  /** Workers a test started, stopped after it whatever its outcome. */
  let started: Worker[];
  beforeEach(async () => {
    api = await startApiTest(dialect, { clock: new ManualClock(START) });
    alice = await client();
    started = [];
    const { ctx } = api.t;
    const sandbox = sandboxTransport(ctx.database, api.clock, { key: ctx.encryptionKey });
    const transport: SmsTransport = {
      async submit(messages, signal) {
        const taken = messages.filter((m) => m.recipient !== REFUSED_FOR_NOW);
        const results = await sandbox.submit(taken, signal);
        return messages.map((m) =>
          m.recipient === REFUSED_FOR_NOW
            ? { accepted: false as const, permanent: false, error: 'busy', errorCode: null }
            : results.shift()!,
        );
      },
      close: () => sandbox.close(),
    };
    sendingWorker = new Worker({ database: ctx.database, clock: api.clock });
    sendingWorker.register(SMS_SEND_KIND, smsSendHandler({ ...ctx, transport, zoneOf: recipientZone }));
    sendingWorker.register(SMS_SINGLE_KIND, smsSingleHandler({ ...ctx, transport }));
  });
  afterEach(async () => {
    await Promise.all(started.map((worker) => worker.stop()));
    await api.close();
  });

  const db = () => api.t.ctx.db;
  /** A batch with a tag of each recipient's own, sent through the sandbox; answers its queueId. */
  const sendBatch = async (account: Client, numbers: string[]) => {
    const response = await account.post('/sms/batch', {
      recipients: numbers.map((mobileNo) => ({
        mobileNo,
        personalizationSubstitutionTags: [{ tagName: '[code]', tagValue: `secret-${mobileNo}` }],
      })),
      senderName: 'HERALD',
      body: 'Your code is [code]',
    });
    assert.equal(response.statusCode, 202, response.body);
    await sendingWorker.drain();
    return response.json().data.QueueId as string;
  };
  const sendRow = (id: string) => db().selectFrom('sends').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
  const content = async (id: string) => JSON.parse((await sendRow(id)).content) as Record<string, unknown>;
  const tagsOf = async (id: string) =>
    (await db().selectFrom('send_recipients').select('tags').where('send_id', '=', id).orderBy('id').execute()).map(
      (r) => r.tags,
    );
  const sandboxCount = async (id: string) =>
    (await db().selectFrom('sandbox_sms').select('id').where('send_id', '=', id).execute()).length;
  const retentionJobs = () => db().selectFrom('jobs').selectAll().where('kind', '=', RETENTION_KIND).execute();
  /** The sweep's job has run (at the clock's time) when it waits for its next run. */
  const swept = (at: number) =>
    waitFor(`the sweep at ${new Date(at).toISOString()}`, async () => {
      const [job] = await retentionJobs();
      return job?.state === 'ready' && Number(job.run_at) === at + RETENTION_EVERY_MS ? job : undefined;
    });
  const startWorker = async () => {
    const worker = createWorker(api.t.ctx, { pollMs: 20 });
    started.push(worker);
    await worker.start();
    return worker;
  };

  it(
    'purges the body, tags and sandbox records of a send completed 31 days ago, not of one completed 29 days ago ' +
      'or still sending; statuses, totals and history stay',
    async () => {
      const bob = await client();
      const old = await sendBatch(alice, ['919812300001', '919812300002']);
      const scheduled = await alice.post('/sms/batch', {
        recipients: [{ mobileNo: '919812300003' }],
        senderName: 'HERALD',
        body: 'Later',
        scheduleDateTime: '2026-01-20T09:00:00Z',
      });
      const cancelled = scheduled.json().data.QueueId as string;
      assert.equal((await alice.delete(`/sms/${cancelled}`)).statusCode, 204);
      api.clock.advance(2 * DAY);
      const recent = await sendBatch(alice, ['919812300004']);
      const bobs = await sendBatch(bob, ['919812300001']);
      api.clock.advance(29 * DAY);
      const sending = await sendBatch(alice, ['919812300005', REFUSED_FOR_NOW]);
      assert.equal((await sendRow(sending)).status, 'Sending');
      const oldRead = (await alice.get(`/sms/${old}`)).json();
      assert.deepEqual(oldRead.totals, { Delivered: 2 });
      assert.equal(await sandboxCount(old), 2);

      const worker = await startWorker();
      await swept(api.clock.now());
      await worker.stop();

      // 31 days: the read is as it was but for its content; the words are gone.
      const purged = { contentState: 'purged', content: { senderName: null, body: null } };
      assert.deepEqual((await alice.get(`/sms/${old}`)).json(), { ...oldRead, ...purged });
      assert.deepEqual(await content(old), { kind: 'batch', senderName: 'HERALD' });
      assert.equal((await sendRow(old)).purged_at, api.clock.now());
      assert.deepEqual(await tagsOf(old), [null, null]);
      assert.equal(await sandboxCount(old), 0);
      const shown = (await alice.get('/sandbox/sms')).json().messages as Array<{ queueId: string }>;
      assert.ok(!shown.some((m) => m.queueId === old), 'the sandbox no longer shows its texts');
      assert.deepEqual(await content(cancelled), { kind: 'batch', senderName: 'HERALD' });
      assert.equal((await alice.get(`/sms/${cancelled}`)).json().status, 'Cancelled');

      // 29 days, and still sending: untouched.
      for (const id of [recent, bobs, sending]) {
        assert.equal((await content(id)).body, 'Your code is [code]');
        assert.equal((await sendRow(id)).purged_at, null);
        assert.ok((await tagsOf(id)).every((tags) => tags?.includes('secret-')));
        assert.equal(await sandboxCount(id), 1);
      }
      assert.equal((await sendRow(sending)).status, 'Sending');
      // A purged send is still read by its own account only.
      assert.equal((await bob.get(`/sms/${old}`)).statusCode, 404);
    },
  );

  it(
    'is one recurring job however many workers start: it runs again after its interval, and its row stays through ' +
      'a restart',
    async () => {
      // Completed 30 days less half an hour before the first sweep: due at the second.
      api.clock.set(START - 30 * DAY + HOUR / 2);
      const edge = await sendBatch(alice, ['919812300001']);
      api.clock.set(START);

      const [a, b] = await Promise.all([startWorker(), startWorker()]);
      const [job] = await retentionJobs();
      assert.equal((await retentionJobs()).length, 1);
      await swept(START);
      assert.equal((await sendRow(edge)).purged_at, null, 'not due at the first sweep');

      api.clock.advance(RETENTION_EVERY_MS);
      const second = await swept(START + RETENTION_EVERY_MS);
      assert.equal((await sendRow(edge)).purged_at, START + RETENTION_EVERY_MS);
      assert.equal(second.id, job.id);
      assert.equal(second.attempts, 0, 'a run that waits for its next spends no attempt');
      await Promise.all([a.stop(), b.stop()]);

      const [stopped] = await retentionJobs();
      assert.deepEqual(
        [stopped.id, stopped.state, Number(stopped.run_at)],
        [job.id, 'ready', START + 2 * RETENTION_EVERY_MS],
      );
      const restarted = await startWorker();
      assert.deepEqual(
        (await retentionJobs()).map((row) => [row.id, Number(row.run_at)]),
        [[job.id, START + 2 * RETENTION_EVERY_MS]],
        'a restart neither adds a job nor moves its time',
      );
      api.clock.advance(RETENTION_EVERY_MS);
      await swept(START + 2 * RETENTION_EVERY_MS);
      await restarted.stop();
    },
  );

  it('purges more rows than a chunk takes over several transactions, each committing its part', async () => {
    const numbers = (n: number, from: number) =>
      Array.from({ length: n }, (_, i) => `9198123${String(from + i).padStart(5, '0')}`);
    const sends: string[] = [];
    for (const from of [100, 200, 300]) {
      sends.push(await sendBatch(alice, numbers(4, from)));
      api.clock.advance(60_000);
    }
    api.clock.advance(31 * DAY);
    const now = api.clock.now();
    const limits = { sends: 2, rows: 5 };
    const remaining = async () => {
      let rows = 0;
      for (const id of sends)
        rows += (await sandboxCount(id)) + (await tagsOf(id)).filter((tags) => tags !== null).length;
      return rows;
    };
    assert.equal(await remaining(), 24);

    // One chunk: five rows of the two oldest sends go, and no send is marked while rows of it remain.
    const first = await api.t.ctx.database.call(purgeSendsChunk, { before: now - 30 * DAY, now, limits });
    assert.deepEqual(first, { sends: 0, rows: 5, more: true });
    assert.equal(await remaining(), 19);
    assert.ok((await Promise.all(sends.map(sendRow))).every((send) => send.purged_at === null));

    const report = await sweep(api.t.ctx.database, now, 30, { limits, channelPurges: SMS_PURGES });
    assert.equal(report.sends, 3);
    assert.equal(report.sendRows, 19);
    // The sends' rows five at a time (3, 2 of the first two sends; 5; 1 and they are marked;
    // 5 of the third; 3 and it is marked), then one statement for each other store.
    assert.equal(report.transactions, 5 + 4);
    assert.equal(await remaining(), 0);
    for (const id of sends) {
      assert.equal((await sendRow(id)).purged_at, now);
      assert.deepEqual(await content(id), { kind: 'batch', senderName: 'HERALD' });
    }
    assert.equal(
      (await sweep(api.t.ctx.database, now, 30, { limits, channelPurges: SMS_PURGES })).transactions,
      1 + 4,
      'a second sweep finds nothing to do, one statement a store',
    );
  });

  it(
    'lets go of dead jobs, settled webhook deliveries and unmatched receipts older than RETENTION_DAYS, and of ' +
      'expired Idempotency-Key records; keeps what is live',
    async () => {
      const receiver: Receiver = await startReceiver();
      try {
        const { ctx } = api.t;
        const { accountId } = alice;
        const failing = new Worker({ database: ctx.database, clock: api.clock });
        failing.register('test.failing', { handle: async () => Promise.reject(new Error('always fails')) });
        const dies = async () => {
          await enqueue(db(), { kind: 'test.failing', payload: null, now: api.clock.now(), maxAttempts: 1 });
          await failing.drain();
        };
        const emit = async () => {
          const id = await emitWebhook(db(), api.clock, { accountId, url: receiver.url, type: 'test.event', data: {} });
          await api.drain();
          return await db()
            .selectFrom('webhook_deliveries')
            .select(['id', 'status'])
            .where('id', '=', id)
            .executeTakeFirstOrThrow();
        };
        const idempotentList = async (key: string, name: string) => {
          const response = await alice.post('/lists', { name }, { 'idempotency-key': key });
          assert.equal(response.statusCode, 201, response.body);
        };
        const receipt = (id: string) =>
          db()
            .transaction()
            .execute((trx) =>
              applyReceipts(trx, dialect, api.clock, {
                receipts: [{ smsc: 'default', operatorMessageId: id, state: 'DELIVRD', errorCode: null }],
              }),
            );

        await dies();
        const delivered = await emit();
        const replayed = await emit();
        assert.deepEqual([delivered.status, replayed.status], ['delivered', 'delivered']);
        await receipt('never-submitted-old');
        const reply = (text: string) =>
          db()
            .insertInto('sms_inbound')
            .values({
              account_id: accountId,
              sender: '919800000001',
              destination: '447700900123',
              text,
              contact_id: null,
              received_at: api.clock.now(),
            })
            .execute();
        await reply('old reply');
        await idempotentList('old-key', 'Old');
        const now = api.clock.now();
        await enqueue(db(), { kind: 'test.later', payload: null, now, runAt: now + 60 * DAY });

        api.clock.advance(30 * DAY);
        await dies();
        const recentDelivered = await emit();
        api.clock.advance(DAY);
        await receipt('never-submitted-recent');
        await reply('recent reply');
        await idempotentList('recent-key', 'Recent');
        // Replayed, it is pending again (its post not yet made): kept, however old.
        const replay = await alice.post(`/webhooks/deliveries/${replayed.id}/retry`);
        assert.equal(replay.statusCode, 202, replay.body);

        const report = await sweep(ctx.database, api.clock.now(), 30, {
          channelPurges: { ...SMS_PURGES, ...INBOUND_PURGES },
        });
        assert.deepEqual(
          [
            report.deadJobs,
            report.deliveries,
            report.channels.unmatchedReceipts,
            report.channels.inboundSms,
            report.idempotencyKeys,
          ],
          [1, 1, 1, 1, 1],
        );
        assert.deepEqual(
          (await db().selectFrom('sms_inbound').select('text').execute()).map((r) => r.text),
          ['recent reply'],
        );

        const jobs = await db().selectFrom('jobs').select(['kind', 'state', 'finished_at']).orderBy('id').execute();
        assert.deepEqual(
          jobs.map((j) => [j.kind, j.state, j.finished_at === null ? null : Number(j.finished_at)]),
          [
            ['test.later', 'ready', null],
            ['test.failing', 'dead', START + 30 * DAY],
            [DELIVER_KIND, 'ready', null],
          ],
        );
        const deliveries = await db().selectFrom('webhook_deliveries').select('id').orderBy('created_at').execute();
        assert.deepEqual(
          deliveries.map((d) => d.id),
          [replayed.id, recentDelivered.id],
        );
        assert.deepEqual(
          (await db().selectFrom('sms_receipts').select('operator_message_id').execute()).map(
            (r) => r.operator_message_id,
          ),
          ['never-submitted-recent'],
        );
        assert.deepEqual(
          (await db().selectFrom('idempotency_keys').select('key').execute()).map((r) => r.key),
          ['recent-key'],
        );
      } finally {
        await receiver.close();
      }
    },
  );
});
