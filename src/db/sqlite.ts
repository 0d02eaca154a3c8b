import { DatabaseSync, type StatementSync, type SQLInputValue } from 'node:sqlite';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { CompiledQuery, SqliteDialect, type Dialect, SqliteDriver, type DatabaseConnection, type SqliteDatabase, type SqliteStatement } from 'kysely';

/**
 * Kysely's SqliteDialect expects better-sqlite3's statement API; node:sqlite has the
 * same operations with spread parameters and no `reader` flag. This adapter bridges
 * the two, converts values node:sqlite refuses to bind, and caches prepared statements
 * (preparing dominates a small INSERT: caching roughly doubles bulk upsert throughput).
 */
function bindable(value: unknown): SQLInputValue {
  if (value === undefined) return null;
  if (typeof value === 'boolean') return value ? 1 : 0;
  if (value instanceof Date) return value.getTime();
  return value as SQLInputValue;
}

class NodeSqliteStatement implements SqliteStatement {
  readonly reader: boolean;
  private readonly statement: StatementSync;
  constructor(statement: StatementSync) {
    this.statement = statement;
    this.reader = statement.columns().length > 0;
  }
  all(parameters: ReadonlyArray<unknown>): unknown[] {
    return this.statement.all(...parameters.map(bindable));
  }
  run(parameters: ReadonlyArray<unknown>): { changes: number | bigint; lastInsertRowid: number | bigint } {
    return this.statement.run(...parameters.map(bindable));
  }
  *iterate(parameters: ReadonlyArray<unknown>): IterableIterator<unknown> {
    yield* this.statement.iterate(...parameters.map(bindable));
  }
}

const STATEMENT_CACHE_SIZE = 500;

class NodeSqliteDatabase implements SqliteDatabase {
  readonly native: DatabaseSync;
  private readonly statements = new Map<string, NodeSqliteStatement>();
  constructor(native: DatabaseSync) {
    this.native = native;
  }
  prepare(sql: string): SqliteStatement {
    let statement = this.statements.get(sql);
    if (!statement) {
      statement = new NodeSqliteStatement(this.native.prepare(sql));
      if (this.statements.size >= STATEMENT_CACHE_SIZE) {
        this.statements.delete(this.statements.keys().next().value!);
      }
      this.statements.set(sql, statement);
    }
    return statement;
  }
  close(): void {
    this.native.close();
  }
}

/**
 * `BEGIN IMMEDIATE` takes the write lock at the start of a transaction. With the default
 * deferred BEGIN, a second process (the CLI beside a running server) that upgrades a read
 * to a write gets SQLITE_BUSY at once instead of waiting out busy_timeout.
 */
class ImmediateSqliteDriver extends SqliteDriver {
  override async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('begin immediate'));
  }
}

export function openSqlite(path: string): { dialect: Dialect; native: DatabaseSync } {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
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
  const config = { database: new NodeSqliteDatabase(native) };
  const base = new SqliteDialect(config);
  const dialect: Dialect = {
    createDriver: () => new ImmediateSqliteDriver(config),
    createQueryCompiler: () => base.createQueryCompiler(),
    createAdapter: () => base.createAdapter(),
    createIntrospector: (db) => base.createIntrospector(db),
  };
  return { dialect, native };
}
