import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { afterEach, beforeEach, it } from 'node:test';
import { sql, type Kysely } from 'kysely';
import type { Schema } from '../../src/db/schema.ts';
import { ManualClock } from '../../src/clock.ts';
import { enqueue, enqueueMany, PRIORITY } from '../../src/queue/queue.ts';
import { retryDelayMs } from '../../src/queue/backoff.ts';
import { completeJob, keepJob, SnoozeJob, Worker, type Job, type JobHandler } from '../../src/queue/worker.ts';
import { claimJobs, claimStatement, leaseOf, MAX_LAPSES } from '../../src/queue/queries.ts';
import { openDatabase } from '../../src/db/database.ts';
import { createTestDatabase, forEachDatabase, type TestDatabase } from '../support/databases.ts';
import { waitFor } from '../support/wait.ts';
import { enqueuesJob } from './support/enqueuing-procedure.ts';

const NODE = process.execPath;
const WORKER_PROCESS = new URL('./worker-process.ts', import.meta.url).pathname;
const ENQUEUING = new URL('./support/enqueuing-procedure.ts', import.meta.url).href;
const realClock = { now: () => Date.now() };

it('backs off exponentially with jitter within ±25 %, capped at an hour', () => {
  assert.equal(retryDelayMs(1, 0.5), 1000);
  assert.equal(retryDelayMs(2, 0.5), 2000);
  assert.equal(retryDelayMs(5, 0.5), 16_000);
  assert.equal(retryDelayMs(1, 0), 750);
  assert.equal(retryDelayMs(1, 0.999999), 1250);
  assert.equal(retryDelayMs(40, 0.5), 60 * 60_000);
});

forEachDatabase((dialect) => {
  let database: TestDatabase;
  let clock: ManualClock;
  beforeEach(async () => {
    database = await createTestDatabase(dialect);
    clock = new ManualClock();
  });
  afterEach(() => database.close());

  const jobs = () => database.db.selectFrom('jobs').selectAll().orderBy('id').execute();
  const rowsIn = async (table: 'jobs' | 'test_runs') =>
    Number((await sql<{ n: number }>`select count(*) as n from ${sql.table(table)}`.execute(database.db)).rows[0].n);
  const workerWith = (handlers: Record<string, JobHandler>, random = () => 0.5) => {
    const worker = new Worker({ database, clock, random });
    for (const [kind, handler] of Object.entries(handlers)) worker.register(kind, handler);
    return worker;
  };
  const recorder = () => {
    const seen: Job[] = [];
    return { seen, handler: { handle: async (job: Job) => void seen.push(job) } };
  };

  it('enqueues inside the caller’s transaction: rolled back with it, committed with it', async () => {
    await assert.rejects(
      database.db.transaction().execute(async (trx) => {
        await enqueue(trx, { kind: 'test', payload: { n: 1 }, now: clock.now() });
        throw new Error('the request failed after queueing');
      }),
      /the request failed/,
    );
    assert.deepEqual(await jobs(), []);
    const job = { kind: 'test', payload: { n: 2 }, now: clock.now() };
    await database.db.transaction().execute((trx) => enqueue(trx, job));
    const { seen, handler } = recorder();
    assert.equal(await workerWith({ test: handler }).drain(), 1);
    assert.deepEqual(
      seen.map((job) => job.payload),
      [{ n: 2 }],
    );
    assert.deepEqual(await jobs(), [], 'a completed job is removed');
  });

  it('neither spends an attempt nor runs onDead when a done job’s completion fails', async () => {
    // The database refuses to delete the job for a moment: a trigger on its row.
    if (dialect === 'postgres') {
      await sql`create function refuse_delete() returns trigger language plpgsql as
                $$ begin raise exception 'the database is away'; end $$`.execute(database.db);
      await sql`create trigger refuse_delete before delete on jobs for each row
                when (old.kind = 'done') execute function refuse_delete()`.execute(database.db);
    } else {
      await sql`create trigger refuse_delete before delete on jobs when old.kind = 'done'
                begin select raise(abort, 'the database is away'); end`.execute(database.db);
    }
    await enqueue(database.db, { kind: 'done', payload: {}, now: clock.now(), maxAttempts: 1 });
    const dead: Job[] = [];
    const worker = workerWith({
      done: { handle: async () => undefined, onDead: async (_trx, job) => void dead.push(job) },
    });
    await worker.drain();
    assert.deepEqual(dead, [], 'its work committed: it did not die');
    const [row] = await jobs();
    assert.deepEqual([row.state, row.attempts], ['running', 1], 'held until its lease lapses');
  });

  it('does not run scheduled work before its time', async () => {
    await enqueue(database.db, { kind: 'test', payload: 'later', now: clock.now(), runAt: clock.now() + 60_000 });
    const { seen, handler } = recorder();
    const worker = workerWith({ test: handler });
    assert.equal(await worker.drain(), 0);
    clock.advance(59_999);
    assert.equal(await worker.drain(), 0);
    clock.advance(1);
    assert.equal(await worker.drain(), 1);
    assert.deepEqual(
      seen.map((job) => job.payload),
      ['later'],
    );
  });

  it('retries a failing job with exponential backoff, then keeps it as dead', async () => {
    await enqueue(database.db, { kind: 'test', payload: null, now: clock.now(), maxAttempts: 3 });
    const attempts: number[] = [];
    const worker = workerWith({
      test: {
        handle: async (job) => {
          attempts.push(job.attempt);
          throw new Error(`boom ${job.attempt}`);
        },
      },
    });

    const start = clock.now();
    await worker.drain();
    let [job] = await jobs();
    assert.equal(job.state, 'ready');
    assert.equal(job.run_at, start + retryDelayMs(1, 0.5));
    assert.equal(job.last_error, 'boom 1');

    clock.set(job.run_at - 1);
    assert.equal(await worker.drain(), 0, 'not before the backoff has passed');
    clock.set(job.run_at);
    await worker.drain();
    [job] = await jobs();
    assert.equal(job.run_at, clock.now() + retryDelayMs(2, 0.5));

    clock.set(job.run_at);
    await worker.drain();
    [job] = await jobs();
    assert.deepEqual(attempts, [1, 2, 3]);
    assert.equal(job.state, 'dead');
    assert.equal(job.last_error, 'boom 3');
    assert.equal(job.finished_at, clock.now());
    clock.advance(24 * 60 * 60_000);
    assert.equal(await worker.drain(), 0, 'a dead job is never run again');
  });

  it('records the failure of a handler that throws what String() cannot read, and backs off', async () => {
    await enqueue(database.db, { kind: 'test', payload: null, now: clock.now(), maxAttempts: 3 });
    const worker = workerWith({
      test: {
        handle: async () => {
          throw Object.create(null);
        },
      },
    });
    const start = clock.now();
    await worker.drain();
    const [job] = await jobs();
    assert.deepEqual([job.state, job.attempts, job.last_error], ['ready', 1, '[object Object]']);
    assert.equal(job.run_at, start + retryDelayMs(1, 0.5));
  });

  it('snoozes a job to the handler’s own time without spending an attempt, however often', async () => {
    await enqueue(database.db, { kind: 'test', payload: null, now: clock.now(), maxAttempts: 2 });
    const attempts: number[] = [];
    const worker = workerWith({
      test: {
        handle: async (job) => {
          attempts.push(job.attempt);
          throw new SnoozeJob(clock.now() + 5000, 'receiver busy');
        },
      },
    });
    for (let n = 0; n < 25; n++) {
      assert.equal(await worker.drain(), 1);
      assert.equal(await worker.drain(), 0, 'not before its time');
      clock.advance(5000);
    }
    const [job] = await jobs();
    assert.deepEqual([job.state, job.attempts, job.last_error], ['ready', 0, 'receiver busy']);
    assert.deepEqual(new Set(attempts), new Set([1]));
  });

  it('adds a job once per idempotency key, and hands the key to every run of it', async () => {
    await enqueue(database.db, { kind: 'test', payload: 1, now: clock.now(), idempotencyKey: 'sms:42' });
    await enqueue(database.db, { kind: 'test', payload: 2, now: clock.now(), idempotencyKey: 'sms:42' });
    assert.equal((await jobs()).length, 1);
    const keys: string[] = [];
    const worker = workerWith({
      test: {
        handle: async (job) => {
          keys.push(job.idempotencyKey);
          if (job.attempt === 1) throw new Error('lost');
        },
      },
    });
    await worker.drain();
    clock.advance(60_000);
    await worker.drain();
    assert.deepEqual(keys, ['sms:42', 'sms:42']);
  });

  it(
    'gives a job whose worker died to another worker once the lease lapses, after a backoff, without spending an ' +
      'attempt',
    async () => {
      await enqueue(database.db, { kind: 'test', payload: null, now: clock.now() });
      const [claimed] = await claimJobs(database.db, database.dialect, {
        kind: 'test',
        limit: 1,
        workerId: 'dead-worker',
        now: clock.now(),
        leaseMs: 0,
      });
      assert.equal(claimed.state, 'running');
      const { seen, handler } = recorder();
      const worker = workerWith({ test: handler });
      assert.equal(await worker.drain(), 0, 'rescued, but not rerun at once');
      const [rescued] = await jobs();
      assert.deepEqual(
        [rescued.state, rescued.attempts, rescued.lapses, rescued.run_at],
        ['ready', 0, 1, clock.now() + 2000],
      );
      clock.advance(1999);
      assert.equal(await worker.drain(), 0, 'not before its backoff');
      clock.advance(1);
      assert.equal(await worker.drain(), 1);
      assert.equal(seen[0].attempt, 1);
      assert.deepEqual(await jobs(), []);
    },
  );

  it('keeps a lease its worker holds by the database’s clock, whatever the host’s clock says', async () => {
    await enqueue(database.db, { kind: 'test', payload: null, now: clock.now() });
    await claimJobs(database.db, database.dialect, {
      kind: 'test',
      limit: 1,
      workerId: 'live-worker',
      now: clock.now(),
      leaseMs: 60_000,
    });
    clock.advance(24 * 60 * 60_000); // a host whose clock runs a day ahead
    const { handler } = recorder();
    assert.equal(await workerWith({ test: handler }).drain(), 0);
    const [job] = await jobs();
    assert.deepEqual([job.state, job.leased_by, job.lapses], ['running', 'live-worker', 0]);
  });

  it(
    'backs off by lapse count and marks dead, running its kind’s onDead in the same transaction, a job whose ' +
      'lease lapses five times',
    async () => {
      await enqueue(database.db, { kind: 'test', payload: 'poison', now: clock.now() });
      const buried: Array<[unknown, string, number]> = [];
      const worker = workerWith({
        test: {
          handle: async () => assert.fail('never run to completion'),
          onDead: async (trx, job, error) => {
            const [row] = await trx.selectFrom('jobs').select('state').where('id', '=', job.id).execute();
            buried.push([job.payload, error, row.state === 'dead' ? 1 : 0]);
          },
        },
      });
      const delays: number[] = [];
      for (let lapse = 1; lapse <= MAX_LAPSES; lapse++) {
        assert.equal(
          (
            await claimJobs(database.db, database.dialect, {
              kind: 'test',
              limit: 1,
              workerId: 'crashing',
              now: clock.now(),
              leaseMs: 0,
            })
          ).length,
          1,
        );
        assert.equal(await worker.drain(), 0);
        const [job] = await jobs();
        if (lapse < MAX_LAPSES) {
          assert.deepEqual([job.state, job.attempts, job.lapses], ['ready', 0, lapse]);
          delays.push(job.run_at - clock.now());
          clock.set(job.run_at);
        } else {
          assert.deepEqual([job.state, job.attempts, job.lapses], ['dead', 0, MAX_LAPSES]);
        }
      }
      assert.deepEqual(delays, [2000, 4000, 8000, 16_000]);
      assert.deepEqual(buried, [
        ['poison', `the lease lapsed: the worker stopped or took too long, ${MAX_LAPSES} times`, 1],
      ]);
    },
  );

  it('counts lapses afresh from a run that recorded progress: a long job outlives five restarts', async () => {
    await enqueue(database.db, { kind: 'test', payload: 'campaign', now: clock.now() });
    const worker = workerWith({ test: { handle: async () => assert.fail('never run to completion') } });
    for (let lapse = 1; lapse <= 2 * MAX_LAPSES; lapse++) {
      const [claimed] = await claimJobs(database.db, database.dialect, {
        kind: 'test',
        limit: 1,
        workerId: 'restarting',
        now: clock.now(),
        leaseMs: 0,
      });
      assert.ok(claimed, `claimed at lapse ${lapse}`);
      // A page recorded under this claim, as the send's worker records each one, then a restart.
      await database.db.transaction().execute((trx) => keepJob(trx, leaseOf(claimed)));
      assert.equal(await worker.drain(), 0);
      const [job] = await jobs();
      assert.deepEqual([job.state, job.lapses], ['ready', 1]);
      clock.set(job.run_at);
    }
  });

  it(
    'runs onDead with the job marked dead when its last attempt ' + 'fails, and keeps neither if onDead throws',
    async () => {
      await enqueue(database.db, { kind: 'test', payload: null, now: clock.now(), maxAttempts: 1 });
      let refuse = true;
      const errors: string[] = [];
      const worker = workerWith({
        test: {
          handle: async () => {
            throw new Error('broken');
          },
          onDead: async (_trx, _job, error) => {
            errors.push(error);
            if (refuse) throw new Error('domain row unavailable');
          },
        },
      });
      await worker.drain();
      let [job] = await jobs();
      assert.equal(job.state, 'running', 'the death rolled back with onDead: the lease lapses and the job is rescued');
      refuse = false;
      await database.db.updateTable('jobs').set({ lease_expires_at: 0 }).execute();
      await worker.drain();
      clock.advance(60_000);
      await worker.drain();
      [job] = await jobs();
      assert.deepEqual([job.state, job.attempts], ['dead', 1]);
      assert.deepEqual(errors, ['broken', 'broken']);
    },
  );

  it('runs the high-priority job first with 50,000 low-priority jobs of its kind ready', {
    timeout: 120_000,
  }, async () => {
    const low = Array.from({ length: 50_000 }, (_, n) => ({
      kind: 'send',
      payload: n,
      now: clock.now() - 1000,
      priority: PRIORITY.fanout,
    }));
    for (let start = 0; start < low.length; start += 10_000)
      await enqueueMany(database.db, low.slice(start, start + 10_000));
    await enqueue(database.db, { kind: 'send', payload: 'otp', now: clock.now(), priority: PRIORITY.otp });
    const [first] = await claimJobs(database.db, database.dialect, {
      kind: 'send',
      limit: 1,
      workerId: 'w',
      now: clock.now(),
      leaseMs: 30_000,
    });
    assert.equal(JSON.parse(first.payload), 'otp');
  });

  if (dialect === 'postgres') {
    // The planner settings under which `update … where id in (select … for update skip locked
    // limit n)` took every ready job, 200 with n = 10: a nested-loop semi-join re-ran the
    // subquery per row, and each run skipped the rows the update had changed and took more.
    const NESTED_LOOPS_ONLY = [
      'enable_hashjoin',
      'enable_mergejoin',
      'enable_material',
      'enable_hashagg',
      'enable_sort',
    ];
    const forceNestedLoops = async (trx: Kysely<Schema>) => {
      for (const setting of NESTED_LOOPS_ONLY) await sql`select set_config(${setting}, 'off', true)`.execute(trx);
    };

    it(
      'claims at most its limit, and no job twice, with claimers ' + 'at once and the planner held to nested loops',
      async () => {
        const READY = 200;
        const LIMIT = 10;
        const CLAIMERS = 4;
        const jobs = Array.from({ length: READY }, (_, n) => ({ kind: 'test', payload: n, now: clock.now() }));
        await enqueueMany(database.db, jobs);
        const claim = (workerId: string) => ({
          kind: 'test',
          limit: LIMIT,
          workerId,
          now: clock.now(),
          leaseMs: 30_000,
        });

        const plan = await database.db.transaction().execute(async (trx) => {
          await forceNestedLoops(trx);
          const { rows } = await sql<{
            'QUERY PLAN': string;
          }>`explain ${claimStatement('postgres', claim('w'))}`.execute(trx);
          return rows.map((row) => row['QUERY PLAN']).join('\n');
        });
        assert.match(plan, /Nested Loop/);
        assert.doesNotMatch(plan, /Hash|Merge|Materialize/);

        // Each round, every claimer claims in its own transaction and holds its rows locked
        // until all have claimed, so each claim must skip the others' rows.
        const claimed: number[] = [];
        while (claimed.length < READY) {
          let arrived = 0;
          let allClaimed!: () => void;
          const everyoneClaimed = new Promise<void>((resolve) => (allClaimed = resolve));
          const rounds = await Promise.all(
            Array.from({ length: CLAIMERS }, (_, n) =>
              database.db.transaction().execute(async (trx) => {
                await forceNestedLoops(trx);
                const rows = await claimJobs(trx, 'postgres', claim(`claimer-${n}`));
                if (++arrived === CLAIMERS) allClaimed();
                await everyoneClaimed;
                return rows.map((row) => row.id);
              }),
            ),
          );
          for (const ids of rounds) assert.ok(ids.length <= LIMIT, `a claim of ${LIMIT} took ${ids.length}`);
          assert.ok(
            rounds.some((ids) => ids.length > 0),
            'the claimers took nothing with jobs left',
          );
          claimed.push(...rounds.flat());
        }
        assert.equal(new Set(claimed).size, claimed.length, 'a job was claimed twice');
        assert.equal(claimed.length, READY);
      },
    );
  }

  it('completes a job in its handler’s transaction: gone only if that transaction commits', async () => {
    await sql`create table work_done (n integer not null)`.execute(database.db);
    const done = () =>
      database.db
        .selectFrom('work_done' as never)
        .select(sql<number>`count(*)`.as('n'))
        .executeTakeFirstOrThrow();
    await enqueue(database.db, { kind: 'test', payload: null, now: clock.now(), maxAttempts: 2 });
    let failCommit = true;
    const worker = workerWith({
      test: {
        handle: async (_job, run) => {
          await database.db.transaction().execute(async (trx) => {
            await sql`insert into work_done (n) values (1)`.execute(trx);
            await completeJob(trx, run.lease);
            if (failCommit) throw new Error('the transaction failed after completing');
          });
          return 'completed';
        },
      },
    });
    await worker.drain();
    const [job] = await jobs();
    assert.equal(job.state, 'ready', 'rolled back with the work: the job is retried');
    assert.equal(job.last_error, 'the transaction failed after completing');
    assert.equal(Number((await done()).n), 0);

    failCommit = false;
    clock.advance(60_000);
    await worker.drain();
    assert.deepEqual(await jobs(), [], 'committed with the work');
    assert.equal(Number((await done()).n), 1);
  });

  it('refuses to complete, and so to commit the work of, a job whose lease another worker took', async () => {
    await sql`create table work_done (n integer not null)`.execute(database.db);
    await enqueue(database.db, { kind: 'test', payload: null, now: clock.now() });
    const worker = workerWith({
      test: {
        handle: async (job, run) => {
          // The lease lapsed mid-run and another worker claimed the job.
          await database.db
            .updateTable('jobs')
            .set({ leased_by: 'another-worker', lease_token: 'another-claim' })
            .where('id', '=', job.id)
            .execute();
          await database.db.transaction().execute(async (trx) => {
            await sql`insert into work_done (n) values (1)`.execute(trx);
            await completeJob(trx, run.lease);
          });
          return 'completed';
        },
      },
    });
    await worker.drain();
    assert.equal(
      Number(
        (
          await database.db
            .selectFrom('work_done' as never)
            .select(sql<number>`count(*)`.as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      ),
      0,
    );
    const [job] = await jobs();
    assert.deepEqual([job.state, job.leased_by], ['running', 'another-worker']);
  });

  it('refuses a stale claim’s completion after the same worker claimed the job again', async () => {
    await enqueue(database.db, { kind: 'test', payload: null, now: clock.now() });
    const claim = () =>
      claimJobs(database.db, database.dialect, {
        kind: 'test',
        limit: 1,
        workerId: 'same-worker',
        now: clock.now(),
        leaseMs: 0,
      });
    const [stale] = await claim();
    await workerWith({}).drain(); // the rescuer returns the lapsed job
    clock.advance(60_000);
    const [fresh] = await claim();
    assert.equal(fresh.id, stale.id);
    await assert.rejects(
      database.db.transaction().execute((trx) => completeJob(trx, leaseOf(stale))),
      /no longer held/,
    );
    assert.equal((await jobs()).length, 1);
    await database.db.transaction().execute((trx) => completeJob(trx, leaseOf(fresh)));
    assert.deepEqual(await jobs(), []);
  });

  it('keeps renewing the lease of a job that runs longer than its lease', async () => {
    await enqueue(database.db, { kind: 'slow', payload: null, now: clock.now() });
    const runs: string[] = [];
    const started = Promise.withResolvers<void>();
    const finish = Promise.withResolvers<void>();
    const leaseMs = 300;
    const slow = new Worker({ database, clock, leaseMs, pollMs: 10 });
    slow.register('slow', {
      handle: async () => {
        runs.push('slow');
        started.resolve();
        await finish.promise;
      },
    });
    const other = new Worker({ database, clock, leaseMs });
    other.register('slow', { handle: async () => void runs.push('other') });
    await slow.start();
    await started.promise;
    const expiry = async () => Number((await jobs())[0]?.lease_expires_at);
    const firstExpiry = await expiry();
    // Leases are judged by the database's clock: the job runs until a renewal came after its first
    // lease would have lapsed, while another worker keeps trying to take it (its clock moved past
    // any lapse's backoff, so that a lapsed job would be run there at once).
    await waitFor('a renewal after the first lease would have lapsed', async () => {
      clock.advance(60_000);
      await other.drain();
      assert.deepEqual(runs, ['slow'], 'no other worker ran the job');
      return (await expiry()) >= firstExpiry + leaseMs ? true : undefined;
    });
    finish.resolve();
    await slow.stop();
    assert.deepEqual(runs, ['slow']);
    assert.deepEqual(await jobs(), []);
  });

  it('runs each kind with its own concurrency', { timeout: 10_000 }, async () => {
    const kinds = ['narrow', 'wide'];
    const queued = Array.from({ length: 12 }, (_, n) => ({ kind: kinds[n % 2], payload: n, now: clock.now() }));
    await enqueueMany(database.db, queued);
    const peak = { wide: 0, narrow: 0 };
    const now = { wide: 0, narrow: 0 };
    const bothFull = Promise.withResolvers<void>();
    const release = Promise.withResolvers<void>();
    // Each run holds until both kinds run as many as they may at once: one claimed past its
    // concurrency would show in its peak then, the rest run through after.
    const gauge = (kind: 'wide' | 'narrow'): JobHandler => ({
      handle: async () => {
        peak[kind] = Math.max(peak[kind], ++now[kind]);
        if (now.wide >= 6 && now.narrow >= 2) bothFull.resolve();
        await release.promise;
        now[kind]--;
      },
    });
    const worker = new Worker({ database, clock, pollMs: 5 });
    worker.register('wide', gauge('wide'), { concurrency: 6 });
    worker.register('narrow', gauge('narrow'), { concurrency: 2 });
    await worker.start();
    await bothFull.promise;
    release.resolve();
    await waitFor('every job done', async () => ((await jobs()).length === 0 ? true : undefined));
    await worker.stop();
    assert.deepEqual(peak, { wide: 6, narrow: 2 });
  });

  it('drains 10,000 jobs with two worker processes: none run twice, none left', { timeout: 120_000 }, async () => {
    await sql`create table test_runs (job_id bigint not null, worker text not null)`.execute(database.db);
    const jobs = Array.from({ length: 10_000 }, (_, n) => ({ kind: 'test.record', payload: n, now: Date.now() }));
    await enqueueMany(database.db, jobs);
    const workers = await Promise.all(
      ['a', 'b'].map((label) => startWorkerProcess(database.url, { WORKER_LABEL: label })),
    );
    try {
      const drained = async () => ((await rowsIn('jobs')) === 0 ? true : undefined);
      await waitFor('every job run', drained, { timeoutMs: 110_000 });
    } finally {
      await Promise.all(workers.map(stopWorkerProcess));
    }
    const { rows } = await sql<{ runs: number; distinct_jobs: number; workers: number }>`
      select count(*) as runs, count(distinct job_id) as distinct_jobs, count(distinct worker) as workers
        from test_runs`.execute(database.db);
    assert.deepEqual(
      rows.map((r) => ({ runs: Number(r.runs), distinct: Number(r.distinct_jobs), workers: Number(r.workers) })),
      [{ runs: 10_000, distinct: 10_000, workers: 2 }],
    );
  });

  it('completes, in another worker, the job of a worker process killed with SIGKILL mid-item', {
    timeout: 60_000,
  }, async () => {
    await sql`create table test_runs (job_id bigint not null, worker text not null)`.execute(database.db);
    await enqueue(database.db, { kind: 'test.hang', payload: null, now: Date.now() });
    // A lease of a few seconds: at one second a loaded machine can delay the heartbeat past it.
    const doomed = await startWorkerProcess(database.url, { WORKER_LABEL: 'doomed', LEASE_MS: '3000' });
    try {
      const midItem = async () => ((await rowsIn('test_runs')) > 0 ? true : undefined);
      await waitFor('the doomed worker mid-item', midItem, { timeoutMs: 30_000 });
    } finally {
      doomed.kill('SIGKILL');
      await once(doomed, 'exit');
    }
    const [leased] = await jobs();
    assert.equal(leased.state, 'running');

    const completed: Job[] = [];
    const survivor = new Worker({ database, clock: realClock, leaseMs: 1000 });
    survivor.register('test.hang', { handle: async (job) => void completed.push(job) });
    // The dead worker's lease lapses by the database's clock, then the job waits out its backoff.
    await waitFor(
      'the job run by the survivor',
      async () => {
        await survivor.drain();
        return completed.length > 0 ? true : undefined;
      },
      { timeoutMs: 20_000 },
    );
    assert.equal(completed.length, 1);
    assert.equal(completed[0].id, leased.id);
    assert.equal(completed[0].attempt, 1, 'its worker’s death spent no attempt');
    assert.deepEqual(await jobs(), []);
  });

  /**
   * How soon a woken worker runs a job: far inside the 60 s poll of the workers here, so only a
   * wake-up gets it there in time, yet seconds, for a loaded machine (a cycle of claim, run and
   * completion took up to 650 ms on SQLite beside other test files and busy loops on two cores).
   */
  const WOKEN_WITHIN_MS = 5_000;

  /** A handler whose runs can be awaited, each with a deadline. */
  const awaitedRuns = () => {
    const waiting = new Map<number, (job: Job) => void>();
    const seen: Job[] = [];
    return {
      handler: {
        handle: async (job: Job) => {
          seen.push(job);
          waiting.get(seen.length)?.(job);
        },
      },
      run: (n: number, withinMs: number) =>
        seen.length >= n
          ? Promise.resolve(seen[n - 1])
          : new Promise<Job>((resolve, reject) => {
              const timer = setTimeout(
                () => reject(new Error(`run ${n} did not come within ${withinMs} ms`)),
                withinMs,
              );
              waiting.set(n, (job) => {
                clearTimeout(timer);
                resolve(job);
              });
            }),
    };
  };

  it('wakes its running worker when a job is queued, in a transaction or not, without waiting the poll', {
    timeout: 30_000,
  }, async () => {
    const runs = awaitedRuns();
    const worker = new Worker({ database, clock: realClock, pollMs: 60_000 });
    worker.register('test', runs.handler);
    await worker.start();
    try {
      await enqueue(database.db, { kind: 'test', payload: 1, now: Date.now() });
      await runs.run(1, WOKEN_WITHIN_MS);
      await enqueue(database.db, { kind: 'test', payload: 2, now: Date.now() });
      assert.equal((await runs.run(2, WOKEN_WITHIN_MS)).payload, 2);
      await database.db.transaction().execute((trx) => enqueue(trx, { kind: 'test', payload: 3, now: Date.now() }));
      assert.equal((await runs.run(3, WOKEN_WITHIN_MS)).payload, 3);
    } finally {
      await worker.stop();
    }
  });

  /**
   * The worker's idle waits, as its onIdle tells them. `asleep` resolves at the next wait longer than the
   * short one after a claim: the worker then sleeps until a wake-up, a scheduled job or its poll. Asked
   * from a handler, it is the wait after that handler's claim.
   */
  const idleWaits = () => {
    let waiting: (() => void) | undefined;
    return {
      onIdle: (_kind: string, ms: number) => {
        if (ms > 1000) waiting?.();
      },
      asleep: () => new Promise<void>((resolve) => (waiting = resolve)),
    };
  };

  it('wakes its running worker when a procedure queues a job, on SQLite from the database’s own thread', {
    timeout: 30_000,
  }, async () => {
    const runs = awaitedRuns();
    const idle = idleWaits();
    const worker = new Worker({ database, clock: realClock, pollMs: 60_000, onIdle: idle.onIdle });
    let asleep: Promise<void> | undefined;
    worker.register('test', {
      handle: (job) => {
        asleep ??= idle.asleep();
        return runs.handler.handle(job);
      },
    });
    await worker.start();
    const withProcedure = openDatabase(database.url, { procedures: [ENQUEUING] });
    try {
      await withProcedure.ready();
      await enqueue(database.db, { kind: 'test', payload: 'first', now: Date.now() });
      await runs.run(1, WOKEN_WITHIN_MS);
      // Past its short wait after the claim, the worker sleeps until a wake-up or its 60 s poll.
      await asleep;
      await withProcedure.call(enqueuesJob, { kind: 'test', payload: 'from a procedure', now: Date.now() });
      assert.equal((await runs.run(2, WOKEN_WITHIN_MS)).payload, 'from a procedure');
    } finally {
      await worker.stop();
      await withProcedure.close();
    }
  });

  it('runs again at once a job snoozed until now, without waiting the poll', { timeout: 60_000 }, async () => {
    const runs: number[] = [];
    const idle = idleWaits();
    const worker = new Worker({ database, clock: realClock, pollMs: 60_000, onIdle: idle.onIdle });
    worker.register('test', {
      handle: async () => {
        runs.push(Date.now());
        if (runs.length === 5) return undefined;
        // Longer than the loop's first short wait after its claim, as a gather of 5,000 events is:
        // the loop sleeps until its poll by the time the job snoozes.
        await idle.asleep();
        throw new SnoozeJob(Date.now(), 'more to do');
      },
    });
    await worker.start();
    try {
      const queuedAt = Date.now();
      await enqueue(database.db, { kind: 'test', payload: null, now: queuedAt });
      await waitFor('five runs', async () => (runs.length >= 5 ? true : undefined), {
        timeoutMs: 5 * WOKEN_WITHIN_MS,
      });
      assert.equal(runs.length, 5, 'snoozed four times, then done');
      // Each run again woken by its snooze, not by the poll: the gaps after the first run bear on it. (The
      // first is a job queued, the test above; on a loaded machine it came 6.3 s after, the others 32-214 ms.)
      const gaps = runs.slice(1).map((at, n) => at - runs[n]);
      assert.ok(Math.max(...gaps) < WOKEN_WITHIN_MS, `runs came ${gaps.join(', ')} ms apart, poll 60 s`);
    } finally {
      await worker.stop();
    }
  });

  it('wakes at the time of a job scheduled for later, without waiting the poll', { timeout: 30_000 }, async () => {
    const runs = awaitedRuns();
    const worker = new Worker({ database, clock: realClock, pollMs: 60_000 });
    worker.register('test', runs.handler);
    await worker.start();
    try {
      await enqueue(database.db, { kind: 'test', payload: 'now', now: Date.now() });
      await runs.run(1, WOKEN_WITHIN_MS);
      const due = Date.now() + 300;
      await enqueue(database.db, { kind: 'test', payload: 'later', now: Date.now(), runAt: due });
      assert.equal((await runs.run(2, 300 + WOKEN_WITHIN_MS)).payload, 'later');
      assert.ok(Date.now() >= due, 'not before its time');
    } finally {
      await worker.stop();
    }
  });

  if (dialect === 'postgres') {
    it('wakes a worker in another process through NOTIFY, long before its poll', { timeout: 30_000 }, async () => {
      await sql`create table test_runs (job_id bigint not null, worker text not null)`.execute(database.db);
      const runs = () => rowsIn('test_runs');
      const other = await startWorkerProcess(database.url, { POLL_MS: '60000' });
      try {
        await enqueue(database.db, { kind: 'test.record', payload: null, now: Date.now() });
        await waitFor('the first run', async () => ((await runs()) >= 1 ? true : undefined));
        const queuedAt = Date.now();
        await enqueue(database.db, { kind: 'test.record', payload: null, now: Date.now() });
        await waitFor('the second run', async () => ((await runs()) >= 2 ? true : undefined), {
          timeoutMs: 2 * WOKEN_WITHIN_MS,
        });
        assert.equal(await runs(), 2);
        const claimedMs = Date.now() - queuedAt;
        assert.ok(claimedMs < WOKEN_WITHIN_MS, `claimed ${claimedMs} ms after it was queued, poll 60 s`);
      } finally {
        await stopWorkerProcess(other);
      }
    });

    it('wakes a worker in another process when a procedure queues a job: the NOTIFY follows its commit', {
      timeout: 60_000,
    }, async () => {
      await sql`create table test_runs (job_id bigint not null, worker text not null)`.execute(database.db);
      const runs = () => rowsIn('test_runs');
      const withProcedure = openDatabase(database.url, { procedures: [ENQUEUING] });
      const other = await startWorkerProcess(database.url, { POLL_MS: '60000' });
      try {
        await withProcedure.ready();
        await enqueue(database.db, { kind: 'test.record', payload: null, now: Date.now() });
        await waitFor('the first run', async () => ((await runs()) >= 1 ? true : undefined));
        for (let n = 2; n <= 4; n++) {
          const queuedAt = Date.now();
          await withProcedure.call(enqueuesJob, { kind: 'test.record', payload: n, now: Date.now() });
          await waitFor(`run ${n}`, async () => ((await runs()) >= n ? true : undefined), {
            timeoutMs: 2 * WOKEN_WITHIN_MS,
          });
          assert.equal(await runs(), n);
          const claimedMs = Date.now() - queuedAt;
          assert.ok(claimedMs < WOKEN_WITHIN_MS, `claimed ${claimedMs} ms after it was queued, poll 60 s`);
        }
      } finally {
        await stopWorkerProcess(other);
        await withProcedure.close();
      }
    });
  }

  it('exits within its grace period despite a handler that ignores its signal; the next worker completes the job', {
    timeout: 60_000,
  }, async () => {
    await sql`create table test_runs (job_id bigint not null, worker text not null)`.execute(database.db);
    await enqueue(database.db, { kind: 'test.stuck', payload: null, now: Date.now() });
    const stuck = await startWorkerProcess(database.url, { STUCK: '1', LEASE_MS: '1000', SHUTDOWN_GRACE_MS: '1000' });
    await waitFor('the job running', async () => ((await jobs())[0].state === 'running' ? true : undefined));
    const exited = once(stuck, 'exit');
    const signalledAt = Date.now();
    stuck.kill('SIGTERM');
    const [code] = await exited;
    assert.equal(code, 0);
    assert.ok(Date.now() - signalledAt < 3000, `exited ${Date.now() - signalledAt} ms after SIGTERM, grace 1 s`);

    const next = await startWorkerProcess(database.url, { WORKER_LABEL: 'next', LEASE_MS: '1000' });
    try {
      await waitFor('the job done by the next worker', async () => ((await jobs()).length === 0 ? true : undefined), {
        timeoutMs: 30_000,
      });
    } finally {
      await stopWorkerProcess(next);
    }
    const { rows } = await sql<{ worker: string }>`select worker from test_runs`.execute(database.db);
    assert.deepEqual(rows, [{ worker: 'next' }]);
  });
});

async function startWorkerProcess(url: string, env: Record<string, string>): Promise<ChildProcess> {
  const child = spawn(NODE, [WORKER_PROCESS], {
    env: { ...process.env, DATABASE_URL: url, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let output = '';
  child.stdout!.on('data', (chunk) => (output += chunk));
  while (!output.includes('started')) await once(child.stdout!, 'data');
  return child;
}

async function stopWorkerProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  child.kill('SIGTERM');
  await once(child, 'exit');
}
