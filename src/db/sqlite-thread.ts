/**
 * The SQLite connection's own thread (see sqlite.ts): it owns the node:sqlite database,
 * runs each statement the main thread sends and posts back the rows or the change count,
 * and runs procedures (procedure.ts) against the same connection through a Kysely of its own.
 */
import { DatabaseSync } from 'node:sqlite';
import { once } from 'node:events';
import { parentPort, workerData, type Worker } from 'node:worker_threads';
import { startThread } from '../threads.ts';
import { Kysely } from 'kysely';
import { AppError, appErrorData, type AppErrorData } from '../errors.ts';
import { nextInLine } from './priority.ts';
import { findProcedure, resolveProcedures, type Procedures } from './procedure.ts';
import { ImmediateSqliteDriver, sqliteDialect, Statements } from './sqlite-statements.ts';
import type { Schema } from './schema.ts';
import type { CheckpointerMessage, CheckpointerRequest } from './sqlite-checkpointer.ts';

/** A statement to run, a procedure to run, or the order to close the database (the thread then ends). */
export type SqliteRequest =
  /** A statement; `urgent` undefined when it belongs to a transaction (see the queue in serve). */
  | { id: number; sql: string; parameters: unknown[]; urgent: boolean | undefined }
  | { id: number; module: string; name: string; args: unknown; urgent: boolean }
  | { close: true };

/**
 * What a failure tells, for the main thread to rebuild the error from: node:sqlite's codes
 * when it came from SQLite (isUniqueViolation reads errcode), and a named error's every
 * field when a procedure threw one (a 404 or a 422 stays itself, as on PostgreSQL).
 */
export interface SqliteFailure {
  message: string;
  code?: string;
  errcode?: number;
  errstr?: string;
  appError?: AppErrorData;
}

export type SqliteReply =
  | { id: number; rows: unknown[] }
  | { id: number; changes: number; lastInsertRowid: number }
  | { id: number; result: unknown }
  | { id: number; error: SqliteFailure };

/** The first message: the database is open, or why it is not. */
export type SqliteOpened = { opened: true } | { opened: false; error: SqliteFailure };

function failure(error: unknown): SqliteFailure {
  if (error instanceof AppError) return { message: error.message, appError: appErrorData(error) };
  // Whatever was thrown, null included: the thread answers every request, or it stops for good.
  const e = (typeof error === 'object' && error !== null ? error : {}) as Partial<SqliteFailure>;
  return { message: e.message ?? String(error), code: e.code, errcode: e.errcode, errstr: e.errstr };
}

function open(path: string): DatabaseSync {
  const native = new DatabaseSync(path);
  // WAL lets readers run beside the writer; synchronous=NORMAL in WAL mode survives a
  // process crash (kill -9) without losing a committed transaction, only power loss can.
  native.exec('PRAGMA journal_mode = WAL');
  native.exec('PRAGMA synchronous = NORMAL');
  native.exec('PRAGMA busy_timeout = 5000');
  // This connection does not checkpoint on its own: it would hold up every write of the
  // process while it copied the WAL into the database file (about a second at 40,000
  // pages). Checkpoints run on a thread of their own (sqlite-checkpointer.ts).
  native.exec('PRAGMA wal_autocheckpoint = 0');
  // 16 MiB of page cache instead of 2 MiB: the contact indexes' pages are hit at random, and
  // at a million contacts the larger cache sped bulk upserts up by about a tenth.
  native.exec('PRAGMA cache_size = -16384');
  native.exec('PRAGMA foreign_keys = ON');
  return native;
}

/**
 * The thread that checkpoints the WAL (sqlite-checkpointer.ts), and the last few frames
 * copied here when it has caught up, at this connection's first moment outside a
 * transaction (`afterRequest`, called after every request): the next write then starts the
 * WAL afresh, so the WAL holds about a round's writes. Dropped whenever a transaction was
 * open, as it was before, the copy hardly ever ran under steady writes: the WAL grew
 * without end (650 MiB in bench:queue's 100,000 jobs), and commits beside the checkpoints
 * of it paused for 30 to 40 ms. An in-memory database has no WAL.
 */
function startCheckpointer(path: string, native: DatabaseSync): { worker: Worker; afterRequest(): void } | undefined {
  if (path === ':memory:') return undefined;
  // It allocates next to nothing: the smallest young generation (1 MiB semi-spaces).
  const worker = startThread(new URL('./sqlite-checkpointer.ts', import.meta.url), {
    workerData: { path },
    resourceLimits: { maxYoungGenerationSizeMb: 3 },
  });
  const finish = native.prepare('PRAGMA wal_checkpoint(PASSIVE)');
  let caughtUp = false;
  const afterRequest = () => {
    if (!caughtUp || native.isTransaction) return;
    caughtUp = false;
    finish.get();
  };
  worker.on('message', (message: CheckpointerMessage) => {
    caughtUp = message === 'caught-up';
    afterRequest();
  });
  // Without it the WAL would grow for ever: the writer checkpoints again, at SQLite's default.
  worker.on('error', () => native.exec('PRAGMA wal_autocheckpoint = 1000'));
  return { worker, afterRequest };
}

async function serve(path: string, procedureModules: readonly string[]): Promise<void> {
  const port = parentPort!;
  let native: DatabaseSync;
  let procedures: Procedures;
  try {
    procedures = await resolveProcedures(procedureModules);
    native = open(path);
  } catch (error) {
    port.postMessage({ opened: false, error: failure(error) } satisfies SqliteOpened);
    return;
  }
  const statements = new Statements(native);
  const db = new Kysely<Schema>({ dialect: sqliteDialect(() => new ImmediateSqliteDriver({ database: statements })) });
  const checkpointer = startCheckpointer(path, native);
  port.postMessage({ opened: true } satisfies SqliteOpened);

  const execute = (id: number, sql: string, parameters: unknown[]): SqliteReply => {
    const statement = statements.prepare(sql);
    if (statement.reader) return { id, rows: statement.all(parameters) };
    const { changes, lastInsertRowid } = statement.run(parameters);
    return { id, changes: Number(changes), lastInsertRowid: Number(lastInsertRowid) };
  };

  const run = async (request: SqliteRequest): Promise<void> => {
    if ('close' in request) {
      if (checkpointer) {
        checkpointer.worker.postMessage({ close: true } satisfies CheckpointerRequest);
        await once(checkpointer.worker, 'exit');
      }
      statements.close();
      port.close();
      return;
    }
    let reply: SqliteReply;
    try {
      if ('sql' in request) reply = execute(request.id, request.sql, request.parameters);
      else
        reply = {
          id: request.id,
          result: await findProcedure(procedures, request).run({ db, dialect: 'sqlite' }, request.args),
        };
    } catch (error) {
      reply = { id: request.id, error: failure(error) };
    }
    try {
      port.postMessage(reply);
    } catch (error) {
      // A result the structured clone cannot carry (a function, a class instance with one).
      port.postMessage({ id: request.id, error: failure(error) } satisfies SqliteReply);
    }
    checkpointer?.afterRequest();
  };

  // Requests wait here, one run a turn of the event loop, so that those arriving meanwhile are
  // in the queue when the next is chosen: an urgent one (an accept, a passcode page's record,
  // the passcode lane's claim) goes ahead of background ones posted before it, as the
  // connection's turns (priority.ts) order the posting. A procedure or a statement outside a
  // transaction hands the connection on once posted (sqlite.ts), so under load several wait
  // here, and an accept queued behind them all waited for each. A transaction's statement keeps
  // its place, and nothing passes it: everything posted before it runs first, and nothing else
  // is posted until its transaction has ended. As with the turns, the oldest request goes
  // first once it has waited its patience, so a campaign keeps moving under a steady stream of
  // urgent work (nextInLine, priority.ts).
  const queue: Array<{ request: SqliteRequest; urgent: boolean | undefined; since: number }> = [];
  let scheduled = false;
  const runNext = async () => {
    const [{ request }] = queue.splice(nextInLine(queue, performance.now()), 1);
    await run(request);
    if (queue.length > 0) setImmediate(runNext);
    else scheduled = false;
  };
  port.on('message', (request: SqliteRequest) => {
    queue.push({ request, urgent: 'urgent' in request ? request.urgent : undefined, since: performance.now() });
    if (scheduled) return;
    scheduled = true;
    setImmediate(runNext);
  });
}

await serve(workerData.path as string, workerData.procedures as string[]);
