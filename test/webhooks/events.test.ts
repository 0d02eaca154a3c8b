import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { sql } from 'kysely';
import { Webhook } from 'standardwebhooks';
import { ManualClock } from '../../src/clock.ts';
import { claimJobs, leaseOf, releaseJob, type JobRow } from '../../src/queue/queries.ts';
import { SnoozeJob, type Job, type Worker } from '../../src/queue/worker.ts';
import {
  appendWebhookEvents,
  appendWebhookEventsAhead,
  GATHER_KIND,
  GATHER_WINDOW_MS,
  webhookGatherHandler,
  type EventStream,
} from '../../src/webhooks/events.ts';
import { ensureSecret } from '../../src/webhooks/secrets.ts';
import { createWorker } from '../../src/server/worker.ts';
import { forEachDatabase } from '../support/databases.ts';
import { bearer, startTestApp, type TestAccount, type TestApp } from '../support/app.ts';
import { startReceiver, type Received, type Receiver } from './support.ts';
import { waitForLockWait } from '../support/wait.ts';

interface StatusEvent {
  messageId: string;
  status: string;
  stream?: string;
}

interface Envelope {
  type: string;
  timestamp: string;
  data: StatusEvent[];
}

const events = (from: number, count: number, stream?: string): StatusEvent[] =>
  Array.from({ length: count }, (_, i) => ({
    messageId: `m-${from + i}`,
    status: 'Delivered',
    ...(stream ? { stream } : {}),
  }));

forEachDatabase((dialect) => {
  let t: TestApp;
  let account: TestAccount;
  let receiver: Receiver;
  let worker: Worker;
  beforeEach(async () => {
    // Standard Webhooks verifiers check webhook-timestamp against the real time (±5 min).
    t = await startTestApp(dialect, { clock: new ManualClock(Date.now()), env: { WEBHOOK_ALLOW_PRIVATE: 'true' } });
    account = await t.createAccount();
    receiver = await startReceiver();
    worker = createWorker(t.ctx);
  });
  afterEach(async () => {
    await receiver.close();
    await t.close();
  });

  const streamOf = (overrides: Partial<EventStream> = {}): EventStream => ({
    accountId: account.row.id,
    url: receiver.url,
    type: 'sms.status',
    ...overrides,
  });

  const append = (batch: StatusEvent[], stream = streamOf()) =>
    t.ctx.db.transaction().execute((trx) => appendWebhookEvents(trx, t.clock, { ...stream, events: batch }));

  /** The post's body, after checking its signature with the account's secret. */
  async function verified(post: Received, accountId = account.row.id): Promise<Envelope> {
    const { secret } = await ensureSecret(t.ctx.db, t.ctx.encryptionKey, t.clock, accountId);
    return new Webhook(secret).verify(post.body, post.headers as Record<string, string>) as Envelope;
  }

  /** Events appended and not yet gathered. */
  const waiting = async () =>
    Number(
      (
        await t.ctx.db
          .selectFrom('webhook_events')
          .select(sql<number>`coalesce(sum(event_count), 0)`.as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    );
  const jobs = () => t.ctx.db.selectFrom('jobs').selectAll().execute();

  /** The gather job of the stream, held by a claim of its own, as another worker's would be. */
  async function claimGather(workerId: string, leaseMs: number): Promise<JobRow> {
    const [row] = await claimJobs(t.ctx.db, dialect, {
      kind: GATHER_KIND,
      limit: 1,
      workerId,
      now: t.clock.now(),
      leaseMs,
    });
    assert.ok(row, 'a gather job is due');
    return row;
  }

  /** The stream's one event, its gather job held by another worker's claim: one side of a race with an appender. */
  async function heldGather(): Promise<JobRow> {
    await append(events(0, 1));
    t.clock.advance(GATHER_WINDOW_MS);
    return claimGather('gathering-worker', 60_000);
  }

  /** Every event posted, post after post. */
  const postedEvents = async () =>
    (await Promise.all(receiver.received.map((post) => verified(post)))).flatMap((post) => post.data);

  const runGather = (row: JobRow) => {
    const job: Job = {
      id: row.id,
      kind: row.kind,
      payload: JSON.parse(row.payload),
      accountId: row.account_id,
      attempt: row.attempts,
      maxAttempts: row.max_attempts,
      idempotencyKey: row.idempotency_key,
    };
    return webhookGatherHandler({
      database: t.ctx.database,
      clock: t.clock,
      encryptionKey: t.ctx.encryptionKey,
    }).handle(job, {
      signal: new AbortController().signal,
      lease: leaseOf(row),
    });
  };

  it(
    'posts 1,200 events appended in three transactions as 500, 500 and 200, in append order, each post signed, ' +
      'one delivery each',
    async () => {
      for (let start = 0; start < 1200; start += 400) await append(events(start, 400));
      assert.equal(await worker.drain(), 0, 'nothing is due before the window ends');
      assert.deepEqual(
        (await jobs()).map((job) => [job.kind, job.run_at]),
        [[GATHER_KIND, t.clock.now() + GATHER_WINDOW_MS]],
        'one gather job for the stream',
      );

      t.clock.advance(GATHER_WINDOW_MS);
      await worker.drain();

      assert.equal(receiver.received.length, 3);
      const posts = await Promise.all(receiver.received.map((post) => verified(post)));
      posts.sort((a, b) => Number(a.data[0].messageId.slice(2)) - Number(b.data[0].messageId.slice(2)));
      assert.deepEqual(
        posts.map((post) => post.data.length),
        [500, 500, 200],
      );
      assert.deepEqual(
        posts.flatMap((post) => post.data),
        events(0, 1200),
      );
      for (const post of posts)
        assert.deepEqual([post.type, post.timestamp], ['sms.status', new Date(t.clock.now()).toISOString()]);
      // Exactly the bytes stored: what replay and every retry post.
      const rows = await t.ctx.db.selectFrom('webhook_deliveries').selectAll().execute();
      assert.deepEqual(rows.map((row) => row.payload).sort(), receiver.received.map((post) => post.body).sort());
      assert.deepEqual(
        new Set(receiver.received.map((post) => post.headers['webhook-id'])),
        new Set(rows.map((row) => row.id)),
      );

      const listed = await t.app.inject({
        method: 'GET',
        url: '/webhooks/deliveries',
        headers: bearer(await t.tokenFor(account)),
      });
      assert.deepEqual(
        listed
          .json()
          .deliveries.map((d: { type: string; status: string; attempts: number }) => [d.type, d.status, d.attempts]),
        [
          ['sms.status', 'delivered', 1],
          ['sms.status', 'delivered', 1],
          ['sms.status', 'delivered', 1],
        ],
      );
      assert.equal(await waiting(), 0, 'gathered events are deleted');
      assert.deepEqual(await jobs(), []);
    },
  );

  it('never puts events of two URLs, two accounts or two types in one post', async () => {
    const other = await t.createAccount();
    const secondReceiver = await startReceiver();
    try {
      const streams = [
        streamOf(),
        streamOf({ url: secondReceiver.url }),
        streamOf({ type: 'email.events' }),
        streamOf({ accountId: other.row.id }),
      ];
      const label = (stream: EventStream) => `${stream.accountId} ${stream.type} ${stream.url}`;
      // One transaction appending to every stream, twice over, interleaved.
      await t.ctx.db.transaction().execute(async (trx) => {
        for (const round of [0, 1]) {
          for (const stream of streams)
            await appendWebhookEvents(trx, t.clock, { ...stream, events: events(round * 10, 10, label(stream)) });
        }
      });
      t.clock.advance(GATHER_WINDOW_MS);
      await worker.drain();

      assert.equal(receiver.received.length, 3);
      assert.equal(secondReceiver.received.length, 1);
      const seen = new Map<string, StatusEvent[]>();
      for (const [post, url] of [
        ...receiver.received.map((post) => [post, receiver.url] as const),
        [secondReceiver.received[0], secondReceiver.url] as const,
      ]) {
        const accountId = JSON.parse(post.body).data[0].stream.split(' ')[0];
        const body = await verified(post, accountId);
        const stream = streams.find((s) => label(s) === body.data[0].stream)!;
        assert.deepEqual([stream.type, stream.url], [body.type, url]);
        assert.ok(
          body.data.every((event) => event.stream === label(stream)),
          'one stream per post',
        );
        seen.set(label(stream), body.data);
      }
      for (const stream of streams) assert.deepEqual(seen.get(label(stream)), events(0, 20, label(stream)));
      await assert.rejects(
        verified(secondReceiver.received[0], other.row.id),
        'signed with its own account’s secret only',
      );
    } finally {
      await secondReceiver.close();
    }
  });

  it(
    'posts an event within a second of its append: later events join the waiting post, and one after it waits for ' +
      'the next',
    async () => {
      const start = t.clock.now();
      await append(events(0, 1));
      t.clock.advance(500);
      await append(events(1, 1));
      t.clock.set(start + GATHER_WINDOW_MS - 1);
      await worker.drain();
      assert.equal(receiver.received.length, 0);

      t.clock.set(start + GATHER_WINDOW_MS);
      await worker.drain();
      assert.equal(receiver.received.length, 1, 'posted within 1 s of the first event');
      assert.ok(t.clock.now() - start <= 1000);
      assert.deepEqual((await verified(receiver.received[0])).data, events(0, 2));

      const third = t.clock.now();
      await append(events(2, 1));
      await worker.drain();
      assert.equal(receiver.received.length, 1, 'a new window starts with the next event');
      t.clock.set(third + GATHER_WINDOW_MS);
      await worker.drain();
      assert.equal(receiver.received.length, 2);
      assert.deepEqual((await verified(receiver.received[1])).data, events(2, 1));
    },
  );

  it(
    'retries a gathered delivery the receiver failed, on the webhook schedule, with the same id and events, none ' +
      'lost or doubled',
    async () => {
      await append(events(0, 600));
      receiver.reply({ status: 503 });
      t.clock.advance(GATHER_WINDOW_MS);
      await worker.drain();
      assert.equal(receiver.received.length, 2);
      const failed = receiver.received[0];

      t.clock.advance(4_999);
      await worker.drain();
      assert.equal(receiver.received.length, 2, 'not before the 5 s retry');
      t.clock.advance(1);
      await worker.drain();
      assert.equal(receiver.received.length, 3);
      const retried = receiver.received[2];
      assert.equal(retried.headers['webhook-id'], failed.headers['webhook-id']);
      assert.equal(retried.body, failed.body);

      const delivered = await Promise.all(receiver.received.slice(1).map((post) => verified(post)));
      const all = delivered
        .flatMap((post) => post.data)
        .sort((a, b) => Number(a.messageId.slice(2)) - Number(b.messageId.slice(2)));
      assert.deepEqual(all, events(0, 600));
      const rows = await t.ctx.db
        .selectFrom('webhook_deliveries')
        .select(['status', 'attempts'])
        .orderBy('attempts')
        .execute();
      assert.deepEqual(
        rows.map((row) => [row.status, row.attempts]),
        [
          ['delivered', 1],
          ['delivered', 2],
        ],
      );
      assert.equal(await waiting(), 0);
      assert.deepEqual(await jobs(), []);
    },
  );

  it(
    'loses nothing when the worker holding the gather job dies, and posts each event once though the dead claim ' +
      'runs late',
    async () => {
      await append(events(0, 300));
      t.clock.advance(GATHER_WINDOW_MS);
      const crashed = await claimGather('crashed-worker', 0);
      // Appended while the job is held: the queued job will gather these too.
      await append(events(300, 200));

      await worker.drain(); // its rescuer returns the lapsed job to the queue, after a backoff
      assert.equal(receiver.received.length, 0);
      t.clock.advance(2_000);
      const live = await claimGather('live-worker', 60_000);

      await assert.rejects(runGather(crashed), /no longer held/, 'the late claim cannot complete the job');
      assert.equal(await waiting(), 500, 'its gather rolled back: the events still wait');
      assert.equal(await t.ctx.db.selectFrom('webhook_deliveries').select('id').executeTakeFirst(), undefined);

      assert.equal(await runGather(live), 'completed');
      await worker.drain();
      assert.equal(receiver.received.length, 1);
      assert.deepEqual((await verified(receiver.received[0])).data, events(0, 500));
      assert.equal(await waiting(), 0);
      assert.deepEqual(await jobs(), []);
    },
  );

  it('leaves no event behind when an append commits while the gather runs: the job runs a window later', async () => {
    const held = await heldGather();

    const open = Promise.withResolvers<void>();
    const appended = Promise.withResolvers<void>();
    // Its enqueue finds the stream's job still queued, so it counts on that gather.
    const appender = t.ctx.db.transaction().execute(async (trx) => {
      await appendWebhookEvents(trx, t.clock, { ...streamOf(), events: events(1, 1) });
      appended.resolve();
      await open.promise;
    });
    await appended.promise;
    let settled = false;
    const gathering = runGather(held).finally(() => (settled = true));
    // PostgreSQL: until the gather, having read the stream, waits for its lock to complete the
    // job (or, were there none, has finished). SQLite: the gather's transaction waits for the
    // one writing connection, and then reads both events.
    if (dialect === 'postgres') {
      await waitForLockWait(t.ctx.db, "the gather to wait for the stream's lock", () => settled, 'advisory');
    }
    open.resolve();
    await appender;
    const outcome = await gathering.then(
      (completed) => completed,
      (error: unknown) => error,
    );
    if (dialect === 'postgres') {
      assert.ok(outcome instanceof SnoozeJob, `the append came after the read: the job stays (${String(outcome)})`);
      assert.equal(outcome.at, t.clock.now() + GATHER_WINDOW_MS);
      const now = t.clock.now();
      await releaseJob(t.ctx.db, leaseOf(held), { runAt: outcome.at, error: outcome.message, now, snoozed: true });
    } else {
      assert.equal(outcome, 'completed');
    }

    t.clock.advance(GATHER_WINDOW_MS);
    await worker.drain();
    const posted = await postedEvents();
    assert.deepEqual(posted, events(0, 2));
    assert.equal(await waiting(), 0);
    assert.deepEqual(await jobs(), []);
  });

  it('posts events written ahead of their queueing though a gather completes its job between the two', async () => {
    const held = await heldGather();

    const queued = Promise.withResolvers<void>();
    const written = Promise.withResolvers<void>();
    // A page's record: its events written first, its other work, then the stream's gather queued.
    const appender = t.ctx.db.transaction().execute(async (trx) => {
      const ahead = await appendWebhookEventsAhead(trx, t.clock, { ...streamOf(), events: events(1, 1) });
      written.resolve();
      await queued.promise;
      await ahead.queue();
    });
    await written.promise;
    const gathers = async () => (await jobs()).filter((job) => job.kind === GATHER_KIND);
    if (dialect === 'postgres') {
      // No appender holds the stream's lock yet, and the written event is not committed: the
      // gather posts the first event and completes its job.
      try {
        assert.equal(await runGather(held), 'completed');
        assert.deepEqual(await gathers(), []);
      } finally {
        queued.resolve();
      }
      await appender;
      assert.equal((await gathers()).length, 1, 'the appender queued the next gather');
    } else {
      // SQLite: the gather's transaction waits for the appender's, then reads both events.
      queued.resolve();
      await appender;
      assert.equal(await runGather(held), 'completed');
    }

    t.clock.advance(GATHER_WINDOW_MS);
    await worker.drain();
    const posted = await postedEvents();
    posted.sort((a, b) => a.messageId.localeCompare(b.messageId));
    assert.deepEqual(posted, events(0, 2));
    assert.equal(await waiting(), 0);
    assert.deepEqual(await jobs(), []);
  });

  it(
    'catches up a stream that fell behind over several runs, ' + '500 events a post, cutting through an append',
    async () => {
      // Appends of 900: the first run's 5,000 events end inside the sixth, whose last event waits for the next run.
      for (let start = 0; start < 5_001; start += 900) await append(events(start, Math.min(900, 5_001 - start)));
      t.clock.advance(GATHER_WINDOW_MS);
      await worker.drain();
      // One host holds eight deliveries at once; any more come back at their turn, within a second.
      t.clock.advance(1_000);
      await worker.drain();
      const posts = await Promise.all(receiver.received.map((post) => verified(post)));
      posts.sort((a, b) => Number(a.data[0].messageId.slice(2)) - Number(b.data[0].messageId.slice(2)));
      assert.deepEqual(
        posts.map((post) => post.data.length),
        [...Array(10).fill(500), 1],
      );
      assert.deepEqual(
        posts.flatMap((post) => post.data),
        events(0, 5_001),
      );
      assert.deepEqual(await jobs(), []);
    },
  );
});
