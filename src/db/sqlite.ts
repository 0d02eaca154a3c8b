/**
 * SQLite runs on a thread of its own (sqlite-thread.ts), and Kysely talks to it by message.
 * node:sqlite is synchronous: on the main thread every statement stopped the event loop for
 * as long as it ran (a 1,000-contact batch holds it for tens of milliseconds), while HTTP,
 * JSON and validation waited, and the machine's second core stayed idle. On its own thread
 * the statements run beside them; a message each way costs tens of microseconds. Work of
 * many statements runs there whole, as a procedure (procedure.ts).
 */
import { closeSync, mkdirSync, openSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Worker } from 'node:worker_threads';
import { startThread } from '../threads.ts';
import { DatabaseSync } from 'node:sqlite';
import {
  CompiledQuery,
  SqliteDriver,
  type DatabaseConnection,
  type Dialect,
  type Driver,
  type QueryResult,
} from 'kysely';
import { appErrorOf } from '../errors.ts';
import { isBackground, Turns } from './priority.ts';
import type { Procedure } from './procedure.ts';
import { beginImmediate, sqliteDialect, Statements } from './sqlite-statements.ts';
import type { SqliteFailure, SqliteOpened, SqliteReply, SqliteRequest } from './sqlite-thread.ts';

function rebuild(failure: SqliteFailure): Error {
  if (failure.appError) return appErrorOf(failure.appError);
  return Object.assign(new Error(failure.message), {
    code: failure.code,
    errcode: failure.errcode,
    errstr: failure.errstr,
  });
}

type Pending = { resolve: (reply: SqliteReply) => void; reject: (error: Error) => void };

class SqliteThread {
  private readonly worker: Worker;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private broken: Error | undefined;
  /** Settles with why when the thread stopped unasked (an error it did not catch, its heap out). */
  readonly lost: Promise<Error>;

  private constructor(worker: Worker) {
    this.worker = worker;
    const { promise, resolve } = Promise.withResolvers<Error>();
    this.lost = promise;
    const stopped = (error: Error) => {
      if (this.broken === undefined) resolve(error);
      this.fail(error);
    };
    worker.on('message', (reply: SqliteReply) => this.settle(reply.id, (p) => p.resolve(reply)));
    worker.on('error', stopped);
    worker.on('exit', (code) => stopped(new Error(`the SQLite thread has stopped (exit code ${code})`)));
  }

  static async start(path: string, procedures: readonly string[]): Promise<SqliteThread> {
    // The young generation that the main thread's 8 MiB semi-spaces make (V8 counts three of
    // them; bin/herald), which this thread had before it had limits of its own: it turns every
    // row over. 16 MiB saved 7 MiB at an email batch's peak (275 MiB against 282) and ran the
    // SMS batch at 4,884 and 5,806 messages/s against 5,422 and 5,949 (bench/sms.ts, one run
    // after another): within this machine's noise, but not a gain, so it stays.
    const worker = startThread(new URL('./sqlite-thread.ts', import.meta.url), {
      workerData: { path, procedures },
      resourceLimits: { maxYoungGenerationSizeMb: 24 },
    });
    const opened = await new Promise<SqliteOpened>((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
    if (!opened.opened) {
      await worker.terminate();
      throw rebuild(opened.error);
    }
    return new SqliteThread(worker);
  }

  /** `urgent`: undefined for a statement of a transaction, which keeps its place in the thread's queue. */
  query(sql: string, parameters: readonly unknown[], urgent: boolean | undefined): Promise<SqliteReply> {
    return this.send((id) => ({ id, sql, parameters: [...parameters], urgent }));
  }

  async call<A, R>(procedure: Procedure<A, R>, args: A): Promise<R> {
    const reply = await this.send((id) => ({
      id,
      module: procedure.module,
      name: procedure.name,
      args,
      urgent: !isBackground(),
    }));
    if ('error' in reply) throw rebuild(reply.error);
    return (reply as { result: R }).result;
  }

  private send(request: (id: number) => SqliteRequest): Promise<SqliteReply> {
    if (this.broken) return Promise.reject(this.broken);
    const id = this.nextId++;
    // The thread is unref'd while idle, so an open database does not keep a finished
    // program alive, and ref'd while it owes an answer, so an awaited query does.
    if (this.pending.size === 0) this.worker.ref();
    this.worker.postMessage(request(id));
    return new Promise((resolve, reject) => this.pending.set(id, { resolve, reject }));
  }

  async close(): Promise<void> {
    if (this.broken) return;
    this.broken = new Error('the SQLite database is closed');
    this.worker.ref();
    this.worker.postMessage({ close: true } satisfies SqliteRequest);
    await new Promise((resolve) => this.worker.once('exit', resolve));
  }

  private settle(id: number, how: (pending: Pending) => void): void {
    const pending = this.pending.get(id);
    if (!pending) return;
    this.pending.delete(id);
    if (this.pending.size === 0) this.worker.unref();
    how(pending);
  }

  private fail(error: Error): void {
    this.broken ??= error;
    for (const id of [...this.pending.keys()]) this.settle(id, (p) => p.reject(error));
  }
}

/**
 * One hold of the thread's one connection, from acquireConnection to releaseConnection. A
 * statement sent outside a transaction hands the connection on as soon as it is posted, as a
 * procedure does (SqliteThreadDriver.call): the thread runs what it is sent in order (an
 * urgent request may go ahead of background ones, sqlite-thread.ts), so nothing posted later
 * comes first, and the next holder need not wait for the answer to cross back to this thread.
 * Under load that wait was most of a hold: the queue's claims, a statement each, kept the
 * connection 1.6 ms at the median and 11 ms at the 99th percentile while the busy main thread
 * got round to their answers, and the accepts waited behind them. In a transaction, the hold
 * lasts until it ends: its statements go one after another, and nothing else between them.
 */
class SqliteThreadConnection implements DatabaseConnection {
  private readonly thread: SqliteThread;
  private readonly give: () => void;
  private inTransaction = false;
  private released = false;
  constructor(thread: SqliteThread, give: () => void) {
    this.thread = thread;
    this.give = give;
  }

  beginTransaction(): void {
    this.inTransaction = true;
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    this.give();
  }

  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    const posted = this.thread.query(query.sql, query.parameters, this.inTransaction ? undefined : !isBackground());
    if (!this.inTransaction) this.release();
    const reply = await posted;
    if ('error' in reply) throw rebuild(reply.error);
    if ('rows' in reply) return { rows: reply.rows as R[] };
    const { changes, lastInsertRowid } = reply as { changes: number; lastInsertRowid: number };
    return { numAffectedRows: BigInt(changes), insertId: BigInt(lastInsertRowid), rows: [] };
  }

  // Kysely calls this from its own async generators, so a throw here rejects the stream's first step.
  streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error('streaming queries are not supported on SQLite');
  }
}

/** Kysely's SqliteDriver, for a connection answered by message: one connection, taken in turn. */
class SqliteThreadDriver implements Driver {
  private readonly path: string;
  private readonly procedures: readonly string[];
  private starting: Promise<void> | undefined;
  private thread: SqliteThread | undefined;
  /** The one connection, in turn: urgent callers before those in the background (priority.ts). */
  readonly turns = new Turns(1);
  private readonly threadLost = Promise.withResolvers<Error>();
  /** Settles when the thread stopped unasked: nothing more can be written in this process. */
  readonly lost = this.threadLost.promise;

  constructor(path: string, procedures: readonly string[]) {
    this.path = path;
    this.procedures = procedures;
  }

  init(): Promise<void> {
    this.starting ??= SqliteThread.start(this.path, this.procedures).then((thread) => {
      this.thread = thread;
      void thread.lost.then(this.threadLost.resolve);
    });
    return this.starting;
  }

  /**
   * Runs a procedure on the thread. The connection is taken only to post it: the thread runs
   * what it is sent in order, each procedure whole, so once posted nothing taken after it can
   * come between its statements, and the next holder need not wait for its answer to cross
   * back to this thread (under load, most of a hold was that wait).
   */
  async call<A, R>(procedure: Procedure<A, R>, args: A): Promise<R> {
    await this.init();
    const hold = await this.acquireConnection();
    try {
      return this.thread!.call(procedure, args);
    } finally {
      hold.release();
    }
  }

  async acquireConnection(): Promise<SqliteThreadConnection> {
    await this.turns.take();
    return new SqliteThreadConnection(this.thread!, () => this.turns.give());
  }

  /** Hands the connection to the next waiter, which then holds it; or frees it (unless the hold did already). */
  async releaseConnection(connection: DatabaseConnection): Promise<void> {
    (connection as SqliteThreadConnection).release();
  }

  beginTransaction(connection: DatabaseConnection): Promise<void> {
    (connection as SqliteThreadConnection).beginTransaction();
    return beginImmediate(connection);
  }

  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('commit'));
  }

  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('rollback'));
  }

  /** Ends the thread, however it was started: by Kysely's first statement or by init() alone (Database.ready). */
  async destroy(): Promise<void> {
    await this.starting?.catch(() => undefined);
    await this.thread?.close();
  }
}

/**
 * The database (`dialect`, on its thread, with `call` for procedures), and a second,
 * read-only connection on the calling thread (`reads`). WAL lets that one read while the
 * thread writes: a read there neither waits for a transaction holding the thread's
 * connection (a contact batch's holds it for tens of milliseconds) nor costs a message.
 * It sees what has committed, so it is for reads that need not see their caller's own
 * uncommitted writes. An in-memory database has no second connection: reads go to the thread.
 */
export function openSqlite(
  path: string,
  procedures: readonly string[],
): {
  dialect: Dialect;
  call: SqliteThreadDriver['call'];
  reads: Dialect;
  started: () => Promise<void>;
  waiting: () => number;
  lost: Promise<Error>;
  close: () => Promise<void>;
} {
  const memory = path === ':memory:';
  if (!memory) {
    mkdirSync(dirname(path), { recursive: true });
    // A new database readable by its owner alone, as its key file is (SQLite gives its WAL and
    // shared-memory files the database's mode): it holds people's numbers and addresses.
    closeSync(openSync(path, 'a', 0o600));
  }
  const driver = new SqliteThreadDriver(path, procedures);
  const dialect = sqliteDialect(() => driver);
  const reads = memory
    ? dialect
    : sqliteDialect(
        () =>
          new SqliteDriver({
            database: async () => {
              const native = new DatabaseSync(path);
              native.exec('PRAGMA busy_timeout = 5000');
              native.exec('PRAGMA query_only = ON');
              return new Statements(native);
            },
          }),
      );
  return {
    dialect,
    call: (procedure, args) => driver.call(procedure, args),
    reads,
    started: () => driver.init(),
    waiting: () => driver.turns.waiting,
    lost: driver.lost,
    // Kysely's destroy() ends the driver only if Kysely started it; `started` may have alone.
    close: () => driver.destroy(),
  };
}
