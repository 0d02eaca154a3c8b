/**
 * Items per second through the work queue: enqueue → claim → complete, with the
 * enqueueing running while the workers drain, timed from the first enqueue to the empty
 * queue. Worker processes are real `Worker`s (bench/queue-worker.ts) with a no-op handler.
 *
 *   npm run bench:queue       # SQLite with 1 worker, PostgreSQL with 1 and with 4
 *
 * Then the priority lane: how long one claim takes to return a one-time passcode's job
 * with 50,000 lower-priority jobs of its kind ready ahead of it.
 *   BENCH_JOBS=100000 npm run bench:queue
 *
 * Then, on SQLite as it is deployed (the Worker in the process that enqueues, both on its one
 * database thread), the longest gap between two committed writes while the jobs go through:
 * the longest any write, a one-time passcode's, would have waited (bench/commit-gaps.ts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { sql } from 'kysely';
import { systemClock } from '../src/clock.ts';
import { migrateToLatest, openDatabase, type Database } from '../src/db/database.ts';
import { claimJobs } from '../src/queue/queries.ts';
import { enqueue, enqueueMany, PRIORITY, type NewJob } from '../src/queue/queue.ts';
import { Worker } from '../src/queue/worker.ts';
import { watchCommitGaps, type CommitGaps } from './commit-gaps.ts';
import { withBenchPostgres } from './herald-process.ts';

const JOBS = Number(process.env.BENCH_JOBS ?? 50_000);
const CHUNK = 1000;

async function startWorker(url: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, [new URL('./queue-worker.ts', import.meta.url).pathname], {
    env: { ...process.env, DATABASE_URL: url },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let output = '';
  child.stdout!.on('data', (chunk) => (output += chunk));
  while (!output.includes('started')) await once(child.stdout!, 'data');
  return child;
}

/** Enqueues JOBS no-op jobs, `perTransaction` at a time, while workers drain them; returns once the queue is empty. */
async function pushJobsThrough(database: Database, perTransaction: number): Promise<void> {
  for (let start = 0; start < JOBS; start += perTransaction) {
    const now = Date.now();
    const count = Math.min(perTransaction, JOBS - start);
    const job = (n: number): NewJob => ({ kind: 'bench.noop', payload: { n: start + n }, now });
    const chunk = Array.from({ length: count }, (_, n) => job(n));
    await database.db.transaction().execute((trx) => enqueueMany(trx, chunk));
  }
  for (;;) {
    const { rows } = await sql<{ n: number | string }>`select count(*) as n from jobs`.execute(database.db);
    if (Number(rows[0].n) === 0) break;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

async function run(url: string, workers: number): Promise<number> {
  const database = openDatabase(url, { poolSize: 2 });
  await migrateToLatest(database);
  const children = await Promise.all(Array.from({ length: workers }, () => startWorker(url)));
  try {
    const started = performance.now();
    await pushJobsThrough(database, CHUNK);
    return JOBS / ((performance.now() - started) / 1000);
  } finally {
    for (const child of children) child.kill('SIGTERM');
    await Promise.all(children.map((child) => (child.exitCode === null ? once(child, 'exit') : undefined)));
    await database.close();
  }
}

/**
 * The longest gap between two committed writes, in ms, with the Worker in this process, the
 * largest the WAL grew, and the main thread's longest stall (garbage collection, or the
 * thread waiting for a core): a gap that long is the main thread's, not the writer's.
 * Transactions of 100 jobs, and claims of as many: one of 1,000 holds the writer for tens of
 * milliseconds by itself, and would hide any other pause.
 */
async function commitGaps(path: string): Promise<CommitGaps & { mainStallMs: number }> {
  const perTransaction = 100;
  const database = openDatabase(`sqlite:${path}`);
  await migrateToLatest(database);
  const worker = new Worker({ database, clock: systemClock, pollMs: 5 });
  worker.register('bench.noop', { handle: async () => {} }, { concurrency: perTransaction });
  const gaps = await watchCommitGaps(path);
  const stalls = monitorEventLoopDelay({ resolution: 1 });
  stalls.enable();
  await worker.start();
  try {
    await pushJobsThrough(database, perTransaction);
    stalls.disable();
    return { ...(await gaps.stop()), mainStallMs: stalls.max / 1e6 };
  } finally {
    await worker.stop();
    await database.close();
  }
}

const LOW_PRIORITY_JOBS = 50_000;
const PRIORITY_CLAIMS = 50;

/** The median and worst time, in ms, of a claim that must pass over 50,000 ready fan-out jobs to take an OTP job. */
async function priorityClaimLatency(url: string): Promise<{ median: number; worst: number }> {
  const database = openDatabase(url, { poolSize: 2 });
  await migrateToLatest(database);
  try {
    const now = Date.now();
    for (let start = 0; start < LOW_PRIORITY_JOBS; start += 10_000) {
      const chunk: NewJob[] = Array.from({ length: 10_000 }, (_, n) => ({
        kind: 'bench.send',
        payload: { n: start + n },
        now: now - 60_000,
        priority: PRIORITY.fanout,
      }));
      await database.db.transaction().execute((trx) => enqueueMany(trx, chunk));
    }
    const took: number[] = [];
    for (let n = 0; n < PRIORITY_CLAIMS; n++) {
      await enqueue(database.db, { kind: 'bench.send', payload: 'otp', now: Date.now(), priority: PRIORITY.otp });
      const started = performance.now();
      const [job] = await claimJobs(database.db, database.dialect, {
        kind: 'bench.send',
        limit: 1,
        workerId: 'bench',
        now: Date.now(),
        leaseMs: 30_000,
      });
      took.push(performance.now() - started);
      if (job.priority !== PRIORITY.otp) throw new Error('the claim passed over the OTP job');
      await database.db.deleteFrom('jobs').where('id', '=', job.id).execute();
    }
    took.sort((a, b) => a - b);
    return { median: took[Math.floor(took.length / 2)], worst: took[took.length - 1] };
  } finally {
    await database.close();
  }
}

const dir = mkdtempSync(join(tmpdir(), 'herald-bench-queue-'));
try {
  console.log(
    `machine: ${cpus().length} × ${cpus()[0]?.model.trim()}, ${Math.round(totalmem() / 2 ** 30)} GiB; ` +
      `node ${process.version}; ${JOBS} jobs a run`,
  );
  const results: Array<[string, number, number]> = [];
  results.push(['sqlite', 1, await run(`sqlite:${join(dir, 'queue.db')}`, 1)]);
  for (const workers of [1, 4])
    results.push(['postgres', workers, await withBenchPostgres('queue', (url) => run(url, workers))]);
  console.log('database   workers   items/s');
  for (const [database, workers, rate] of results)
    console.log(`${database.padEnd(10)} ${String(workers).padStart(7)} ${rate.toFixed(0).padStart(9)}`);
  const gaps = await commitGaps(join(dir, 'gaps.db'));
  console.log(
    `sqlite, one process: longest gap between two committed writes: ${gaps.longestMs.toFixed(1)} ms ` +
      `(${gaps.longestUnwatchedMs.toFixed(1)} ms in a gap the watcher did not watch throughout, itself ` +
      `waiting up to ${gaps.longestBlindMs.toFixed(1)} ms for a core; ` +
      `main thread's longest stall: ${gaps.mainStallMs.toFixed(1)} ms); largest ` +
      `WAL: ${(gaps.largestWalBytes / 2 ** 20).toFixed(0)} MiB`,
  );
  const lanes: Array<[string, { median: number; worst: number }]> = [
    ['sqlite', await priorityClaimLatency(`sqlite:${join(dir, 'lanes.db')}`)],
    ['postgres', await withBenchPostgres('queue', priorityClaimLatency)],
  ];
  console.log(
    `OTP claim with ${LOW_PRIORITY_JOBS} lower-priority jobs ready ` +
      `(${PRIORITY_CLAIMS} claims)\ndatabase   median ms   worst ms`,
  );
  for (const [database, { median, worst }] of lanes)
    console.log(`${database.padEnd(10)} ${median.toFixed(2).padStart(9)} ${worst.toFixed(2).padStart(10)}`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
