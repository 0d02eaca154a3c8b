/**
 * The SQLite connection's own thread (see sqlite.ts): it owns the node:sqlite database,
 * runs each statement the main thread sends, and posts back the rows or the change count.
 */
import { DatabaseSync, type SQLInputValue, type StatementSync } from 'node:sqlite';
import { parentPort, workerData } from 'node:worker_threads';

/** A statement to run, or the order to close the database, after which the thread ends. */
export type SqliteRequest = { id: number; sql: string; parameters: SQLInputValue[] } | { close: true };

/** What node:sqlite tells of a failed statement; the main thread rebuilds the error from it. */
export interface SqliteFailure {
  message: string;
  code?: string;
  errcode?: number;
  errstr?: string;
}

export type SqliteReply =
  | { id: number; rows: unknown[] }
  | { id: number; changes: number; lastInsertRowid: number }
  | { id: number; error: SqliteFailure };

/** The first message: the database is open, or why it is not. */
export type SqliteOpened = { opened: true } | { opened: false; error: SqliteFailure };

const STATEMENT_CACHE_SIZE = 500;

function failure(error: unknown): SqliteFailure {
  const e = error as SqliteFailure;
  return { message: e.message ?? String(error), code: e.code, errcode: e.errcode, errstr: e.errstr };
}

function open(path: string): DatabaseSync {
  const native = new DatabaseSync(path);
  // WAL lets readers run beside the writer; synchronous=NORMAL in WAL mode survives a
  // process crash (kill -9) without losing a committed transaction, only power loss can.
  native.exec('PRAGMA journal_mode = WAL');
  native.exec('PRAGMA synchronous = NORMAL');
  native.exec('PRAGMA busy_timeout = 5000');
  // Checkpoint the WAL every 10,000 pages (about 40 MiB) instead of every 1,000: fewer,
  // larger copies back into the database file made bulk contact upserts about 10 % faster.
  native.exec('PRAGMA wal_autocheckpoint = 10000');
  // 16 MiB of page cache instead of 2 MiB: the contact indexes' pages are hit at random, and
  // at a million contacts the larger cache sped bulk upserts up by about a tenth.
  native.exec('PRAGMA cache_size = -16384');
  native.exec('PRAGMA foreign_keys = ON');
  return native;
}

/** Prepared statements by text: preparing dominates a small INSERT (caching about doubles bulk upserts). */
class Statements {
  private readonly cache = new Map<string, { statement: StatementSync; reader: boolean }>();
  private readonly native: DatabaseSync;
  constructor(native: DatabaseSync) {
    this.native = native;
  }

  get(sql: string): { statement: StatementSync; reader: boolean } {
    let entry = this.cache.get(sql);
    if (!entry) {
      const statement = this.native.prepare(sql);
      entry = { statement, reader: statement.columns().length > 0 };
      if (this.cache.size >= STATEMENT_CACHE_SIZE) this.cache.delete(this.cache.keys().next().value!);
      this.cache.set(sql, entry);
    }
    return entry;
  }
}

function serve(path: string): void {
  const port = parentPort!;
  let native: DatabaseSync;
  try {
    native = open(path);
  } catch (error) {
    port.postMessage({ opened: false, error: failure(error) } satisfies SqliteOpened);
    return;
  }
  const statements = new Statements(native);
  port.postMessage({ opened: true } satisfies SqliteOpened);
  port.on('message', (request: SqliteRequest) => {
    if ('close' in request) {
      native.close();
      port.close();
      return;
    }
    const { id, sql, parameters } = request;
    let reply: SqliteReply;
    try {
      const { statement, reader } = statements.get(sql);
      if (reader) reply = { id, rows: statement.all(...parameters) };
      else {
        const { changes, lastInsertRowid } = statement.run(...parameters);
        reply = { id, changes: Number(changes), lastInsertRowid: Number(lastInsertRowid) };
      }
    } catch (error) {
      reply = { id, error: failure(error) };
    }
    port.postMessage(reply);
  });
}

serve(workerData.path as string);
