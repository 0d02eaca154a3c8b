import { sql, type Kysely } from 'kysely';
import { dialectOf } from '../db/dialect.ts';
import type { Schema } from '../db/schema.ts';

/**
 * The stream locks of events.ts's protocol: PostgreSQL's advisory lock on the stream's key,
 * held shared by each appender and exclusively by the gather until commit. SQLite needs none:
 * it runs one write transaction at a time.
 */

type Db = Kysely<Schema>;

/** A row lock's clause, for a select of `webhook_events`. */
interface Lockable<Q> {
  forUpdate(): Q;
}

const SQLITE = {
  lockStreamShared: async (_db: Db, _key: string): Promise<void> => {},
  lockStream: async (_db: Db, _key: string): Promise<void> => {},
  lockTaken: <Q>(select: Lockable<Q> & Q): Q => select,
};

const POSTGRES: typeof SQLITE = {
  lockStreamShared: async (db, key) => {
    await sql`select pg_advisory_xact_lock_shared(hashtextextended(${key}, 0))`.execute(db);
  },
  lockStream: async (db, key) => {
    await sql`select pg_advisory_xact_lock(hashtextextended(${key}, 0))`.execute(db);
  },
  lockTaken: (select) => select.forUpdate(),
};

const STATEMENTS = { sqlite: SQLITE, postgres: POSTGRES };

/** An appender's hold on the stream, until its transaction ends. */
export function lockStreamShared(db: Db, key: string): Promise<void> {
  return STATEMENTS[dialectOf(db)].lockStreamShared(db, key);
}

/** The gather's hold on the stream, until its transaction ends: it waits for every appender. */
export function lockStream(db: Db, key: string): Promise<void> {
  return STATEMENTS[dialectOf(db)].lockStream(db, key);
}

/**
 * A gather's read of the append it cuts, locked until it commits (PostgreSQL): an erasure
 * (privacy/erasures.ts) that would write over it meanwhile waits, then rewrites what the gather
 * left, rather than have the gather write its clear read back over the erasure's.
 */
export function lockTaken<Q>(db: Db, select: Lockable<Q> & Q): Q {
  return STATEMENTS[dialectOf(db)].lockTaken(select);
}
