/**
 * Wakes idle workers when jobs are queued, so that polling is only a fallback: in this
 * process through an event, in other processes through PostgreSQL's NOTIFY on one channel.
 */
import { EventEmitter } from 'node:events';
import { BroadcastChannel, isMainThread } from 'node:worker_threads';
import type { Kysely } from 'kysely';
import type pg from 'pg';
import type { Schema } from '../db/schema.ts';

export const JOBS_CHANNEL = 'herald_jobs';

// Process-wide, because enqueue is handed only a connection or transaction. A worker woken
// for another database's job claims nothing and idles again.
const queued = new EventEmitter().setMaxListeners(0);

// SQLite's procedures run on the database's own thread (db/sqlite-thread.ts), whose module
// instances, this one's emitter included, are not the main thread's: a job a procedure queues
// (a send's 202, a page's webhook events) is announced to the workers over this channel, or
// they would find it only at their next poll. Unreferenced: it keeps no thread alive.
const THREAD_CHANNEL = 'herald-jobs-queued';
let fromThreads: BroadcastChannel | undefined;
let toMainThread: BroadcastChannel | undefined;
// Kinds queued on this thread since its last announcement: one message a turn of its event
// loop, not one per enqueue (a post cost about as much as the send's insert at 500 a second).
let unannounced: Set<string> | undefined;

/**
 * Announces newly queued kinds to this process's workers (other processes hear of them by
 * NOTIFY on PostgreSQL, queue.ts). On SQLite it is called in the enqueuing transaction, so
 * the event may come before the commit: the woken worker's claim waits behind that
 * transaction on the one writing connection. On PostgreSQL it comes after a procedure's
 * commit; in a transaction of other code it may come before, and the NOTIFY the insert
 * itself carries, delivered at commit (to this process's listener too), wakes it again.
 */
export function announceJobs(kinds: Set<string>): void {
  if (isMainThread) {
    for (const kind of kinds) queued.emit('queued', kind);
    return;
  }
  if (!unannounced) {
    const pending = new Set<string>();
    unannounced = pending;
    setImmediate(() => {
      unannounced = undefined;
      toMainThread ??= new BroadcastChannel(THREAD_CHANNEL).unref();
      toMainThread.postMessage([...pending]);
    });
  }
  for (const kind of kinds) unannounced.add(kind);
}

/** Calls back with each kind queued in this process, on any of its threads; returns the unsubscribe. */
export function onJobsQueued(listener: (kind: string) => void): () => void {
  if (!fromThreads) {
    fromThreads = new BroadcastChannel(THREAD_CHANNEL).unref();
    fromThreads.onmessage = (message) => {
      for (const kind of (message as { data: string[] }).data) queued.emit('queued', kind);
    };
  }
  queued.on('queued', listener);
  return () => queued.off('queued', listener);
}

const RECONNECT_MS = 1000;

/**
 * LISTENs on a dedicated connection for jobs queued by any process; after the connection
 * drops it reconnects and calls back with no kind, since NOTIFYs sent meanwhile are lost.
 * A NOTIFY from `ownNotifier`, this process's notifier, is skipped: its workers were woken
 * in-process already. Returns the function that stops listening.
 */
export function listenForJobs(
  connect: () => Promise<pg.Client>,
  onKind: (kind: string | undefined) => void,
  options: { ownNotifier?: () => number | undefined; log?: { error(object: object, message: string): void } } = {},
): () => Promise<void> {
  const { ownNotifier, log } = options;
  let stopped = false;
  let client: pg.Client | undefined;
  let retry: NodeJS.Timeout | undefined;
  const reconnectLater = () => {
    client = undefined;
    if (stopped || retry) return;
    retry = setTimeout(() => {
      retry = undefined;
      void open().then(() => onKind(undefined));
    }, RECONNECT_MS);
  };
  const open = async () => {
    try {
      const opened = await connect();
      client = opened;
      opened.on('error', (err) => log?.error({ err }, 'job wake-up connection failed'));
      opened.on('end', () => client === opened && reconnectLater());
      opened.on('notification', (message) => message.processId !== ownNotifier?.() && onKind(message.payload));
      await opened.query(`listen ${JOBS_CHANNEL}`);
      if (stopped) await opened.end();
    } catch (err) {
      log?.error({ err }, 'listening for job wake-ups failed');
      reconnectLater();
    }
  };
  void open();
  return async () => {
    stopped = true;
    clearTimeout(retry);
    const closing = client;
    client = undefined;
    await closing?.end();
  };
}

/** When the next ready job of the kind is due, if any. */
export async function nextRunAt(db: Kysely<Schema>, kind: string): Promise<number | undefined> {
  const row = await db
    .selectFrom('jobs')
    .select((eb) => eb.fn.min('run_at').as('run_at'))
    .where('kind', '=', kind)
    .where('state', '=', 'ready')
    .executeTakeFirst();
  return row?.run_at == null ? undefined : Number(row.run_at);
}
