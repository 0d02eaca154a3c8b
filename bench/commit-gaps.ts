/**
 * The longest time between two committed writes to an SQLite database: how long the
 * longest pause of writes lasted (a WAL checkpoint run by the writer used to be one). A
 * connection of its own, on a thread of its own, that never writes sees
 * `PRAGMA data_version` change whenever any other connection commits; it looks every
 * millisecond, so the figure is good to about a millisecond. It looks at the WAL file's
 * size as often: the largest is the bound the checkpoints kept it to.
 */
import { once } from 'node:events';
import { statSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';

export interface CommitGaps {
  /** The longest gap seen, in milliseconds. */
  longestMs: number;
  /** The largest size of the WAL file seen, in bytes. */
  largestWalBytes: number;
}

export interface CommitGapWatch {
  stop(): Promise<CommitGaps>;
}

export async function watchCommitGaps(path: string): Promise<CommitGapWatch> {
  const stopped = new Int32Array(new SharedArrayBuffer(4));
  const worker = new Worker(new URL(import.meta.url), { workerData: { commitGaps: { path, stopped } } });
  await once(worker, 'message');
  return {
    async stop() {
      Atomics.store(stopped, 0, 1);
      Atomics.notify(stopped, 0);
      const [gaps] = (await once(worker, 'message')) as [CommitGaps];
      await worker.terminate();
      return gaps;
    },
  };
}

function watch(path: string, stopped: Int32Array): void {
  const version = new DatabaseSync(path).prepare('PRAGMA data_version');
  let seen = version.get()!.data_version;
  let lastCommit: number | undefined;
  let longest = 0;
  let largestWal = 0;
  parentPort!.postMessage('watching');
  while (Atomics.wait(stopped, 0, 0, 1) !== 'ok' && Atomics.load(stopped, 0) === 0) {
    largestWal = Math.max(largestWal, statSync(`${path}-wal`, { throwIfNoEntry: false })?.size ?? 0);
    const current = version.get()!.data_version;
    if (current === seen) continue;
    const now = performance.now();
    if (lastCommit !== undefined) longest = Math.max(longest, now - lastCommit);
    lastCommit = now;
    seen = current;
  }
  parentPort!.postMessage({ longestMs: longest, largestWalBytes: largestWal } satisfies CommitGaps);
}

if (!isMainThread && workerData?.commitGaps) watch(workerData.commitGaps.path as string, workerData.commitGaps.stopped as Int32Array);
