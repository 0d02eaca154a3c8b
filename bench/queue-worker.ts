/**
 * One worker process of bench/queue.ts: a real Worker on DATABASE_URL running `bench.noop`
 * jobs, whose handler does nothing, so the figure is the queue's own cost.
 */
import { systemClock } from '../src/clock.ts';
import { openDatabase } from '../src/db/database.ts';
import { Worker } from '../src/queue/worker.ts';

const database = openDatabase(process.env.DATABASE_URL!, { poolSize: 4 });
const worker = new Worker({ database, clock: systemClock, pollMs: 5 });
worker.register('bench.noop', { handle: async () => {} }, { concurrency: Number(process.env.CONCURRENCY ?? 500) });
process.once('SIGTERM', async () => {
  await worker.stop();
  await database.close();
  process.exit(0);
});
await worker.start();
console.log('started');
