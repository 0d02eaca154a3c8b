/**
 * The longest time between two committed writes to an SQLite database: how long the
 * longest pause of writes lasted (a WAL checkpoint run by the writer used to be one). A
 * connection of its own, on a thread of its own, that never writes sees
 * `PRAGMA data_version` change whenever any other connection commits; it looks every
 * millisecond, so the figure is good to about a millisecond. It looks at the WAL file's
 * size as often: the largest is the bound the checkpoints kept it to.
 *
 * Unless the watcher itself waits for a core: on a loaded machine it went 20 to 36 ms
 * without looking while the enqueuer saw 7 to 12 of its transactions commit, and called
 * that a gap. So a gap in which the watcher did not look for more than BLIND_MS counts
 * apart, as `longestUnwatchedMs`, with the watcher's longest such wait beside it.
 */
import { once } from 'node:events';
import { statSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';

/** Longer between two looks, and the watcher may have missed commits: it waited for a core. */
const BLIND_MS = 5;

export interface CommitGaps {
  /** The longest gap the watcher watched throughout, in milliseconds. */
  longestMs: number;
  /** The longest gap during which the watcher did not look for a while: an upper bound. */
  longestUnwatchedMs: number;
  /** The watcher's own longest time between two looks. */
  longestBlindMs: number;
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
  const gaps: CommitGaps = { longestMs: 0, longestUnwatchedMs: 0, longestBlindMs: 0, largestWalBytes: 0 };
  let lastCommit: number | undefined;
  let lastLook = performance.now();
  let blindInGap = false;
  parentPort!.postMessage('watching');
  while (Atomics.wait(stopped, 0, 0, 1) !== 'ok' && Atomics.load(stopped, 0) === 0) {
    const now = performance.now();
    gaps.longestBlindMs = Math.max(gaps.longestBlindMs, now - lastLook);
    blindInGap ||= now - lastLook > BLIND_MS;
    lastLook = now;
    gaps.largestWalBytes = Math.max(
      gaps.largestWalBytes,
      statSync(`${path}-wal`, { throwIfNoEntry: false })?.size ?? 0,
    );
    const current = version.get()!.data_version;
    if (current === seen) continue;
    if (lastCommit !== undefined) {
      const which = blindInGap ? 'longestUnwatchedMs' : 'longestMs';
      gaps[which] = Math.max(gaps[which], now - lastCommit);
    }
    lastCommit = now;
    blindInGap = false;
    seen = current;
  }
  parentPort!.postMessage(gaps);
}

if (!isMainThread && workerData?.commitGaps)
  watch(workerData.commitGaps.path as string, workerData.commitGaps.stopped as Int32Array);
