/**
 * node:sqlite under Kysely's SqliteDriver, which expects better-sqlite3's statement API:
 * the database's thread (sqlite-thread.ts) and the main thread's read connection
 * (sqlite.ts) both run on this.
 */
import {
  CompiledQuery,
  SqliteAdapter,
  SqliteDriver,
  SqliteIntrospector,
  SqliteQueryCompiler,
  type DatabaseConnection,
  type Dialect,
  type Driver,
  type SqliteDatabase,
  type SqliteStatement,
} from 'kysely';
import type { DatabaseSync, SQLInputValue, StatementSync } from 'node:sqlite';

const STATEMENT_CACHE_SIZE = 500;

/** node:sqlite binds neither booleans, Dates nor undefined. */
function bindable(value: unknown): SQLInputValue {
  if (value === undefined) return null;
  if (typeof value === 'boolean') return value ? 1 : 0;
  if (value instanceof Date) return value.getTime();
  return value as SQLInputValue;
}

/** Prepared statements by text: preparing dominates a small INSERT (caching about doubles bulk upserts). */
export class Statements implements SqliteDatabase {
  private readonly cache = new Map<string, SqliteStatement>();
  private readonly native: DatabaseSync;
  constructor(native: DatabaseSync) {
    this.native = native;
  }

  prepare(sql: string): SqliteStatement {
    let statement = this.cache.get(sql);
    if (!statement) {
      statement = adapt(this.native.prepare(sql));
      if (this.cache.size >= STATEMENT_CACHE_SIZE) this.cache.delete(this.cache.keys().next().value!);
      this.cache.set(sql, statement);
    }
    return statement;
  }

  close(): void {
    this.native.close();
  }
}

function adapt(statement: StatementSync): SqliteStatement {
  return {
    reader: statement.columns().length > 0,
    all: (parameters) => statement.all(...parameters.map(bindable)),
    run: (parameters) => statement.run(...parameters.map(bindable)),
    iterate: (parameters) => statement.iterate(...parameters.map(bindable)),
  };
}

/**
 * `BEGIN IMMEDIATE` takes the write lock at the start of a transaction. With the default
 * deferred BEGIN, a second process (the CLI beside a running server) that upgrades a read
 * to a write gets SQLITE_BUSY at once instead of waiting out busy_timeout.
 */
export async function beginImmediate(connection: DatabaseConnection): Promise<void> {
  await connection.executeQuery(CompiledQuery.raw('begin immediate'));
}

/** Kysely's SqliteDriver on node:sqlite (through Statements), beginning transactions with beginImmediate. */
export class ImmediateSqliteDriver extends SqliteDriver {
  override beginTransaction(connection: DatabaseConnection): Promise<void> {
    return beginImmediate(connection);
  }
}

/**
 * SQLite's DDL is transactional, which Kysely's adapter does not claim: so claimed, its migrator
 * runs the pending migrations in one transaction (BEGIN IMMEDIATE: a second process migrating
 * waits for it), and one that fails or is killed halfway leaves the database as it was, as on
 * PostgreSQL, where before it left a migration half done and every later start failing on it.
 */
class TransactionalDdlSqliteAdapter extends SqliteAdapter {
  override get supportsTransactionalDdl(): boolean {
    return true;
  }
}

/** Kysely's SQLite dialect around any driver. */
export const sqliteDialect = (createDriver: () => Driver): Dialect => ({
  createDriver,
  createQueryCompiler: () => new SqliteQueryCompiler(),
  createAdapter: () => new TransactionalDdlSqliteAdapter(),
  createIntrospector: (db) => new SqliteIntrospector(db),
});
