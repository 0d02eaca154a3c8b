import { Kysely, Migrator, PostgresDialect, sql, type PostgresPool } from 'kysely';
import pg from 'pg';
import type { Schema } from './schema.ts';
import { openSqlite } from './sqlite.ts';
import { resolveProcedures, type Procedure } from './procedure.ts';
import { Notifier } from './notifications.ts';
import { prepareMarkedStatements } from './prepared.ts';
import { Turns } from './priority.ts';
import { migrations } from './migrations/index.ts';
import type { DialectName } from './dialect.ts';
import { Gathering, GROUP_SIZE } from './gathering.ts';

export type { DialectName };

export interface GroupCount {
  groups: number;
  callers: number;
}

/** Database.gather and Database.gathered over `call`: a Gathering per procedure of groups. */
function gatheringOver(call: Database['call']): Pick<Database, 'gather' | 'gathered'> {
  const gatherings = new Map<Procedure<never[], unknown[]>, Gathering<unknown, unknown>>();
  const counts = new Map<string, GroupCount>();
  return {
    gather<A, R>(procedure: Procedure<A[], R[]>, args: A): Promise<R> {
      let gathering = gatherings.get(procedure as Procedure<never[], unknown[]>) as Gathering<A, R> | undefined;
      if (!gathering) {
        const count = { groups: 0, callers: 0 };
        counts.set(procedure.name, count);
        gathering = new Gathering<A, R>((group) => call(procedure, group), {
          maxSize: GROUP_SIZE,
          onGroup: (size) => {
            count.groups += 1;
            count.callers += size;
          },
        });
        gatherings.set(procedure as Procedure<never[], unknown[]>, gathering as Gathering<unknown, unknown>);
      }
      return gathering.run(args);
    },
    gathered: () => counts,
  };
}

export interface Database {
  db: Kysely<Schema>;
  dialect: DialectName;
  /**
   * For reads that need not see their caller's own uncommitted writes (authentication, a
   * request's checks): on SQLite a read-only connection beside the writing one (sqlite.ts),
   * on PostgreSQL the same pool as `db`.
   */
  reads: Kysely<Schema>;
  /** How many callers wait for a connection of `db`, which it hands out urgent ones first (priority.ts). */
  waitingForConnection(): number;
  /** Runs a procedure where the data is (procedure.ts). */
  call<A, R>(procedure: Procedure<A, R>, args: A): Promise<R>;
  /**
   * Runs a procedure of groups for this caller together with whoever calls it meanwhile
   * (gathering.ts): resolves with the caller's own result once its group has committed.
   */
  gather<A, R>(procedure: Procedure<A[], R[]>, args: A): Promise<R>;
  /** By procedure name: the groups `gather` wrote and the callers in them, since the process started. */
  gathered(): ReadonlyMap<string, GroupCount>;
  /**
   * Resolves once every procedure of the modules it was opened with is found where it is
   * said to be, on SQLite by the database's thread too; rejects, naming the fault, if one
   * is not. Awaited at start, so that fault stops the start instead of failing a request.
   */
  ready(): Promise<void>;
  /** PostgreSQL: a connection of its own, outside the pool, for LISTEN. */
  connectListener?: () => Promise<pg.Client>;
  /**
   * PostgreSQL: the backend that sends this process's NOTIFYs after its procedures' commits
   * (notifications.ts), so its listeners can skip what they already heard of in-process.
   */
  notifierProcessId?: () => number | undefined;
  /**
   * SQLite: settles with why when the database's thread stopped unasked, after which nothing
   * can be written in this process until it starts again (serve then stops). PostgreSQL: none.
   */
  lost?: Promise<Error>;
  close(): Promise<void>;
}

// BIGINT (OID 20) holds epoch-millisecond times and counters, all far below 2^53;
// pg returns it as a string by default.
const pgTypes = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === 20
      ? (value: string) => Number(value)
      : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
};

/** The file of a `sqlite:<path>` URL (or `:memory:`); undefined for PostgreSQL. */
export function sqlitePath(url: string): string | undefined {
  return url.startsWith('sqlite:') ? url.slice('sqlite:'.length) : undefined;
}

export interface OpenOptions {
  poolSize?: number;
  /**
   * The modules that define the procedures this database runs (the application's are listed
   * in src/server/procedures.ts, which its start passes here). None by default: a database opened
   * to migrate, or by a bench or a test of the queue, runs none.
   */
  procedures?: readonly string[];
}

export function openDatabase(url: string, options: OpenOptions = {}): Database {
  const procedures = options.procedures ?? [];
  const ready = async () => {
    await resolveProcedures(procedures);
  };
  const path = sqlitePath(url);
  if (path !== undefined) {
    const sqlite = openSqlite(path, procedures);
    const db = new Kysely<Schema>({ dialect: sqlite.dialect });
    const reads = new Kysely<Schema>({ dialect: sqlite.reads });
    return {
      db,
      reads,
      dialect: 'sqlite',
      call: sqlite.call,
      ...gatheringOver(sqlite.call),
      waitingForConnection: sqlite.waiting,
      lost: sqlite.lost,
      ready: async () => {
        await Promise.all([ready(), sqlite.started()]);
      },
      close: async () => {
        await reads.destroy();
        await db.destroy();
        await sqlite.close();
      },
    };
  }
  const size = options.poolSize ?? 10;
  const pool = new pg.Pool({ connectionString: url, max: size, types: pgTypes });
  // A client's error (a server restart, its backend terminated) must not crash the process. An
  // idle client's reaches the pool, which replaces it; one checked out emits it on the client
  // itself, where pg-pool no longer listens, once its query has failed with it (the caller's).
  pool.on('error', () => {});
  pool.on('connect', (client) => client.on('error', () => {}));
  prepareMarkedStatements(pool);
  const turns = new Turns(size);
  const db = new Kysely<Schema>({ dialect: new PostgresDialect({ pool: inTurns(pool, turns) }) });
  const connectListener = async () => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    return client;
  };
  const notifier = new Notifier(connectListener);
  const call: Database['call'] = (procedure, args) =>
    notifier.unitOfWork(() => procedure.run({ db, dialect: 'postgres' }, args));
  return {
    db,
    reads: db,
    dialect: 'postgres',
    waitingForConnection: () => turns.waiting,
    call,
    ...gatheringOver(call),
    ready,
    connectListener,
    notifierProcessId: () => notifier.processId,
    close: async () => {
      await notifier.close();
      await db.destroy();
    },
  };
}

/**
 * The pool's connections handed out urgent callers first (priority.ts): pg's own queue is
 * first come, first served, and beside a campaign over SMPP a passcode's statements waited
 * there behind five of the campaign's and its receipts' on average, up to 37.
 */
function inTurns(pool: pg.Pool, turns: Turns): PostgresPool {
  return {
    async connect() {
      await turns.take();
      let client: pg.PoolClient;
      try {
        client = await pool.connect();
      } catch (error) {
        turns.give();
        throw error;
      }
      const release = client.release.bind(client);
      client.release = (destroy?: boolean | Error) => {
        client.release = release;
        release(destroy);
        turns.give();
      };
      return client;
    },
    end: () => pool.end(),
  };
}

/** Kysely's Migrator keeps the migrations run in this table (its default name). */
const MIGRATION_TABLE = 'kysely_migration';

const migratorOf = (database: Database) =>
  new Migrator({ db: database.db, provider: { getMigrations: async () => migrations } });

/** A schema this Herald cannot run on or bring up to date: its message says what to do, alone. */
export class MigrationError extends Error {}

/**
 * The database brought up to date; the migrations applied, by name. One a newer Herald migrated
 * (`herald migrate` before processes are replaced one by one) is left as it is: this one runs on
 * it as the processes already running do, so that one of them restarting in that window comes
 * back. One that also lacks a migration this Herald knows is from another line of versions.
 */
export async function migrateToLatest(database: Database): Promise<string[]> {
  // The first statement of every start: its failure is the database unreachable or refusing us.
  const executed = await executedMigrations(database).catch((error: unknown) => {
    throw new MigrationError(`cannot use the database of DATABASE_URL: ${(error as Error).message}`, { cause: error });
  });
  if (aheadOfThis(executed)) return [];
  const { error, results } = await migratorOf(database).migrateToLatest();
  // A newer Herald's `migrate` that held the migrations' lock while this one waited for it.
  if (error && aheadOfThis(await executedMigrations(database))) return [];
  if (error) throw error;
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}

/**
 * Whether a newer Herald migrated the database past this one's migrations (true), or not
 * (false); a MigrationError when it also lacks one of them.
 */
function aheadOfThis(executed: string[]): boolean {
  const newer = executed.filter((name) => !(name in migrations));
  if (newer.length === 0) return false;
  const missing = Object.keys(migrations).filter((name) => !executed.includes(name));
  if (missing.length === 0) return true;
  throw new MigrationError(
    `the database holds migrations this Herald does not know (${newer.join(', ')}) and lacks ${missing[0]}: ` +
      'run the Herald that migrated it, or a newer one',
  );
}

/** The migrations a database has run, by name; none for one never migrated. */
async function executedMigrations(database: Database): Promise<string[]> {
  const tables = await database.db.introspection.getTables({ withInternalKyselyTables: true });
  if (!tables.some((table) => table.name === MIGRATION_TABLE)) return [];
  const { rows } = await sql<{ name: string }>`select name from ${sql.table(MIGRATION_TABLE)}`.execute(database.db);
  return rows.map((row) => row.name);
}

/** The migrations the database has yet to run, by name: it is read, never changed (no table is made). */
export async function pendingMigrations(database: Database): Promise<string[]> {
  return (await migratorOf(database).getMigrations()).filter((m) => m.executedAt === undefined).map((m) => m.name);
}

export async function isReachable(database: Database): Promise<boolean> {
  try {
    await sql`select 1`.execute(database.db);
    return true;
  } catch {
    return false;
  }
}
