import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import { claimJobs } from '../../src/queue/queries.ts';
import { SMS_SEND_KIND, SMS_SINGLE_KIND } from '../../src/sms/accept.ts';
import { GATHER_KIND, GATHER_WINDOW_MS } from '../../src/webhooks/events.ts';
import { forEachDatabase } from '../support/databases.ts';
import { startApiTest, type ApiClient, type ApiTest } from '../support/client.ts';
import { waitForLockWait } from '../support/wait.ts';

/**
 * The order in which a page's record takes the queue's rows. A worker's heartbeat renews the
 * leases of every job it holds in one statement, a stream's gather job among them, and a
 * record that queues a gather waits for a renewal of that job under way. Had the record
 * completed its own job first, the heartbeat would wait for that row in turn: a lock cycle,
 * which PostgreSQL ends by failing one of the two, and a failed record leaves its page to be
 * sent again when its job is retried.
 */
forEachDatabase((dialect) => {
  let api: ApiTest;
  let alice: ApiClient;
  beforeEach(async () => {
    api = await startApiTest(dialect, { clock: new ManualClock(Date.now()) });
    alice = await api.client();
  });
  afterEach(() => api.close());

  /** A passcode (`/sms/single`, recorded by recordSingles) or a batch of one (recordSmsPage). */
  const paths = [
    { path: '/sms/single', kind: SMS_SINGLE_KIND, recipient: (to: string) => ({ recipient: to }) },
    { path: '/sms/batch', kind: SMS_SEND_KIND, recipient: (to: string) => ({ recipients: [{ mobileNo: to }] }) },
  ];
  const accept = async ({ path, recipient }: (typeof paths)[number], to: string) => {
    const response = await alice.post(path, {
      ...recipient(to),
      senderName: 'HERALD',
      body: 'Your code is 123456',
      webHookUrl: 'http://127.0.0.1:9/hook',
    });
    assert.equal(response.statusCode, 202, response.body);
    return response.json().data.QueueId as string;
  };
  const jobOf = async (kind: string) => {
    const rows = await api.t.ctx.db.selectFrom('jobs').select('id').where('kind', '=', kind).execute();
    assert.equal(rows.length, 1, `one ${kind} job`);
    return rows[0].id;
  };

  /**
   * The send's job (`shape.kind`, accepted to a second number) and its stream's gather job,
   * which another worker holds as it gathers; then, with `prepare` done, the worker's run
   * (`api.drain`) while a heartbeat (queue/queries.ts, extendLeases) renews the gather's lease
   * first and, once the run waits for that row (PostgreSQL; SQLite's one writer waits for the
   * whole transaction), the send's. Answers the send's QueueId and job, once both have ended.
   */
  const runBesideHeartbeat = async (
    shape: (typeof paths)[number],
    prepare: (queueId: string, send: number) => Promise<void> = async () => {},
  ) => {
    await accept(shape, '919812300001');
    await api.drain();
    const gather = await jobOf(GATHER_KIND);
    await claimJobs(api.t.ctx.db, dialect, {
      kind: GATHER_KIND,
      limit: 1,
      workerId: 'gathering-worker',
      now: api.clock.now() + GATHER_WINDOW_MS,
      leaseMs: 60_000,
    });
    const queueId = await accept(shape, '919812300002');
    const send = await jobOf(shape.kind);
    await prepare(queueId, send);

    const renewed = Promise.withResolvers<void>();
    const next = Promise.withResolvers<void>();
    const heartbeat = api.t.ctx.db.transaction().execute(async (trx) => {
      const renew = (id: number) =>
        trx
          .updateTable('jobs')
          .set({ lease_expires_at: api.clock.now() + 60_000 })
          .where('id', '=', id)
          .where('state', '=', 'running')
          .execute();
      await renew(gather);
      renewed.resolve();
      await next.promise;
      await renew(send);
    });
    await renewed.promise;
    let settled = false;
    const run = api.drain().finally(() => (settled = true));
    if (dialect === 'postgres') await waitForLockWait(api.t.ctx.db, 'the run to wait for the heartbeat', () => settled);
    next.resolve();
    await heartbeat;
    await run;
    return { queueId, send };
  };

  for (const shape of paths)
    it(`records ${shape.path}'s page while a heartbeat renews the stream’s gather job, then the send’s`, async () => {
      const { queueId } = await runBesideHeartbeat(shape);
      const [recipient] = (await alice.get(`/sms/${queueId}`)).json().recipients;
      assert.equal(recipient.status, 'Delivered', 'the page is recorded, the send’s job completed');
      assert.deepEqual(await api.t.ctx.db.selectFrom('jobs').select('id').where('kind', '=', shape.kind).execute(), []);
    });

  it('ends a dead send’s recipients while a heartbeat renews the stream’s gather job, then the dying one', async () => {
    const [batch] = paths.filter((shape) => shape.path === '/sms/batch');
    const { queueId, send } = await runBesideHeartbeat(batch, async (queueId, send) => {
      // Its last attempt, and one that fails: its content no longer reads.
      await api.t.ctx.db.updateTable('jobs').set({ max_attempts: 1 }).where('id', '=', send).execute();
      await api.t.ctx.db.updateTable('sends').set({ content: 'not JSON' }).where('id', '=', queueId).execute();
    });
    const [recipient] = await api.t.ctx.db
      .selectFrom('send_recipients')
      .select('status')
      .where('send_id', '=', queueId)
      .execute();
    assert.equal(recipient.status, 'Failed', 'its recipient ended as the job died');
    const [row] = await api.t.ctx.db.selectFrom('jobs').select('state').where('id', '=', send).execute();
    assert.equal(row.state, 'dead');
  });
});
