import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import { claimJobs } from '../../src/queue/queries.ts';
import { Worker } from '../../src/queue/worker.ts';
import { DELIVER_OPTIONS } from '../../src/server/worker.ts';
import { webhookDeliveryHandler } from '../../src/webhooks/deliver.ts';
import { createDeliveries, DELIVER_KIND, type DeliveryJob } from '../../src/webhooks/outbox.ts';
import { forEachDatabase } from '../support/databases.ts';
import { startTestApp, type TestAccount, type TestApp } from '../support/app.ts';
import { waitFor } from '../support/wait.ts';
import { startReceiver, type Receiver } from './support.ts';

const BACKLOG = 2000;
const PER_ACCOUNT = DELIVER_OPTIONS.perAccount!;

forEachDatabase((dialect) => {
  let t: TestApp;
  let busy: TestAccount;
  let quiet: TestAccount;
  let receiver: Receiver;
  beforeEach(async () => {
    // Standard Webhooks' timestamps are checked against the real time: the manual clock starts there.
    t = await startTestApp(dialect, { clock: new ManualClock(Date.now()) });
    busy = await t.createAccount();
    quiet = await t.createAccount();
    receiver = await startReceiver();
  });
  afterEach(async () => {
    await receiver.close();
    await t.close();
  });

  /** `count` deliveries of the account, all due now, to a host name of its own at the receiver. */
  const deliveries = (account: TestAccount, host: string, count: number) =>
    t.ctx.db.transaction().execute((trx) =>
      createDeliveries(
        trx,
        t.clock.now(),
        Array.from({ length: count }, (_, n) => ({
          accountId: account.row.id,
          url: `http://${host}:${receiver.port}/hooks`,
          type: 'contacts.batch',
          body: JSON.stringify({ n }),
        })),
      ),
    );

  it(`claims at most ${PER_ACCOUNT} of one account’s posts a claim, its oldest, and another account’s`, async () => {
    const backlog = await deliveries(busy, 'busy.test', BACKLOG);
    const [late] = await deliveries(quiet, 'quiet.test', 1);
    const claim = (limit: number) =>
      claimJobs(t.ctx.db, dialect, {
        kind: DELIVER_KIND,
        limit,
        workerId: 'w',
        now: t.clock.now(),
        leaseMs: 30_000,
        perAccount: PER_ACCOUNT,
      });
    const ids = (rows: Awaited<ReturnType<typeof claim>>) =>
      rows.map((row) => (JSON.parse(row.payload) as DeliveryJob).deliveryId);
    const first = ids(await claim(32));
    assert.equal(first.length, PER_ACCOUNT + 1);
    assert.ok(first.includes(late), 'the other account’s post is in the first claim');
    assert.deepEqual(
      first.filter((id) => id !== late).sort(),
      backlog.slice(0, PER_ACCOUNT).sort(),
      'the busy account’s oldest',
    );
    // The busy account's next, and nothing claimed twice.
    const second = ids(await claim(32));
    assert.deepEqual(second.sort(), backlog.slice(PER_ACCOUNT, 2 * PER_ACCOUNT).sort());
  });

  it(`posts another account’s one event at once while one account has ${BACKLOG} posts due`, {
    timeout: 60_000,
  }, async () => {
    await deliveries(busy, 'busy.test', BACKLOG);
    const [late] = await deliveries(quiet, 'quiet.test', 1);
    const handler = webhookDeliveryHandler(
      { ...t.ctx, config: { webhookAllowPrivate: true } },
      { resolve: async () => [{ address: '127.0.0.1', family: 4 }] },
    );
    const worker = new Worker({ database: t.ctx.database, clock: t.clock });
    worker.register(DELIVER_KIND, handler, DELIVER_OPTIONS);
    const startedAt = Date.now();
    await worker.start();
    try {
      await waitFor('the other account’s post', async () =>
        receiver.received.some((post) => post.headers['webhook-id'] === late) ? true : undefined,
      );
      const tookMs = Date.now() - startedAt;
      const before = receiver.received.findIndex((post) => post.headers['webhook-id'] === late);
      // Before: the whole backlog was claimed first, 32 a claim of which the busy account posts 8
      // (its share of the slots), so some 500 of its posts came before.
      assert.ok(before <= 4 * PER_ACCOUNT, `${before} posts came first, in ${tookMs} ms`);
    } finally {
      await worker.stop();
    }
    // None lost: each delivery still pending has its job, to come back at its turn.
    const pending = await t.ctx.db
      .selectFrom('webhook_deliveries')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('status', '=', 'pending')
      .executeTakeFirstOrThrow();
    const jobs = await t.ctx.db
      .selectFrom('jobs')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('kind', '=', DELIVER_KIND)
      .where('state', '=', 'ready')
      .executeTakeFirstOrThrow();
    assert.equal(Number(jobs.n), Number(pending.n));
    const delivered = await t.ctx.db
      .selectFrom('webhook_deliveries')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('status', '=', 'delivered')
      .executeTakeFirstOrThrow();
    assert.equal(Number(delivered.n) + Number(pending.n), BACKLOG + 1);
  });
});
