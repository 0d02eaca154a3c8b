/**
 * Checkpoints the WAL from a connection of its own, on a thread of its own (started by the
 * database's thread, sqlite-thread.ts), so that the writing connection never copies the
 * bulk of it. A checkpoint copies the WAL's pages back into the database file: run by the
 * writer (SQLite's autocheckpoint), every write of the process waited for it, about a second
 * for the 40,000 pages the writer used to let pile up. A PASSIVE checkpoint takes no lock a
 * writer needs, so commits go on while it copies.
 *
 * Copying is not all: the WAL starts again from its beginning only when a write begins while
 * every frame of it is copied, and while writes go on beside a checkpoint that never happens.
 * So this thread checkpoints again until few frames came in meanwhile, then tells the
 * writer, which checkpoints those few itself between two of its transactions (5 to 10 ms
 * measured, its two fsyncs mostly); its next write then restarts the WAL. Imports nothing
 * but node built-ins: its thread should cost little memory.
 */
import { DatabaseSync } from 'node:sqlite';
import { parentPort, workerData } from 'node:worker_threads';

/**
 * The writer's thread posts `close` to end this one; this one posts `caught-up`. Types only:
 * importing this module runs it.
 */
export type CheckpointerRequest = { close: true };
export type CheckpointerMessage = 'caught-up';

/**
 * A page written again and again (an index page above all) is copied once per checkpoint:
 * the reason the writer's checkpoints were made rare. Off the writer's path, two a second
 * keep the WAL to what half a second of writes adds: 122 MiB with 100,000 jobs going
 * through (bench:queue), against 230-250 MiB at one a second, with the same throughput and
 * gaps between commits. Four a second kept it to 60-70 MiB but cost 5 % of the throughput
 * (32,400 jobs/s against 34,000-35,000): each round ends with the writer's own finish.
 */
const INTERVAL_MS = 500;
/** Frames left for the writer to copy: about 5 µs each on this project's machine, so a few milliseconds at most. */
const FEW_FRAMES = 500;
/** Checkpoints a round at most: each copies what the one before left, so they shrink fast unless writes outrun them. */
const PASSES = 5;

const database = new DatabaseSync(workerData.path as string);
const checkpoint = database.prepare('PRAGMA wal_checkpoint(PASSIVE)');

function round(): void {
  let frames = -1;
  for (let pass = 0; pass < PASSES; pass++) {
    const { log } = checkpoint.get() as { log: number };
    // The WAL grew by few frames since the last pass (or restarted): the writer can finish.
    if (frames >= 0 && log - frames < FEW_FRAMES) break;
    frames = log;
  }
  parentPort!.postMessage('caught-up' satisfies CheckpointerMessage);
}

const timer = setInterval(() => {
  try {
    round();
  } catch {
    // Another process's checkpoint or an exclusive lock: the next round tries again.
  }
}, INTERVAL_MS);
parentPort!.on('message', (_request: CheckpointerRequest) => {
  clearInterval(timer);
  database.close();
  parentPort!.close();
});
