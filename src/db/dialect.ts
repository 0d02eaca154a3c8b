import { PostgresAdapter, type Kysely } from 'kysely';

/** Which database a connection talks to: the one difference storage code may branch on. */
export type DialectName = 'sqlite' | 'postgres';

/** For code handed only a connection or a transaction (the queue's enqueue, a webhook append). */
export function isPostgres<DB>(db: Kysely<DB>): boolean {
  return db.getExecutor().adapter instanceof PostgresAdapter;
}

/** The dialect of a connection or a transaction, to pick a module's statements by (its queries.ts). */
export function dialectOf<DB>(db: Kysely<DB>): DialectName {
  return isPostgres(db) ? 'postgres' : 'sqlite';
}

/**
 * Whether write transactions run side by side, each blind to the others' uncommitted rows:
 * PostgreSQL's do; SQLite runs one at a time.
 */
export const CONCURRENT_WRITES: Record<DialectName, boolean> = { sqlite: false, postgres: true };

/**
 * Whether a table numbered by its rowid or identity may give a deleted row's id to a new one:
 * SQLite does once the rows with the highest ids are gone (it counts on from the highest left);
 * PostgreSQL's identity never does.
 */
export const REUSES_ROW_IDS: Record<DialectName, boolean> = { sqlite: true, postgres: false };

/**
 * Whether a read on the main thread's connection runs to its end at once: SQLite's does, in
 * this thread; PostgreSQL's is a round trip, while which other requests arrive.
 */
export const SYNCHRONOUS_READS: Record<DialectName, boolean> = { sqlite: true, postgres: false };
