/**
 * A worker process for the queue tests: a real Worker on the database in DATABASE_URL,
 * with two test kinds. `test.record` writes one row to test_runs per run (so a job run
 * twice shows up twice); `test.hang` writes its row, then never finishes, to be killed.
 * `test.stuck` never finishes and ignores its abort signal in a process started with
 * STUCK=1, and records its run like `test.record` in any other.
 * Prints "started" once it is claiming; SIGTERM stops it gracefully.
 */
import { sql } from 'kysely';
import { systemClock } from '../../src/clock.ts';
import { openDatabase } from '../../src/db/database.ts';
import { Worker } from '../../src/queue/worker.ts';

const database = openDatabase(process.env.DATABASE_URL!, { poolSize: 4 });
const label = process.env.WORKER_LABEL ?? String(process.pid);
const record = (jobId: number) =>
  sql`insert into test_runs (job_id, worker) values (${jobId}, ${label})`.execute(database.db);

const worker = new Worker({
  database,
  clock: systemClock,
  leaseMs: Number(process.env.LEASE_MS ?? 30_000),
  pollMs: Number(process.env.POLL_MS ?? 20),
  shutdownGraceMs: Number(process.env.SHUTDOWN_GRACE_MS ?? 30_000),
});
worker.register('test.record', { handle: async (job) => void (await record(job.id)) }, { concurrency: 50 });
worker.register(
  'test.hang',
  {
    handle: async (job) => {
      await record(job.id);
      await new Promise(() => {});
    },
  },
  { concurrency: 1 },
);
worker.register('test.stuck', {
  handle: async (job) => {
    if (process.env.STUCK === '1') await new Promise(() => {});
    await record(job.id);
  },
});

process.once('SIGTERM', async () => {
  await worker.stop();
  await database.close();
  process.exit(0);
});
await worker.start();
console.log('started');
