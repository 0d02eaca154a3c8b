import { sql, type Kysely } from 'kysely';
import { dialectOf } from '../db/dialect.ts';
import type { Schema } from '../db/schema.ts';

/**
 * The stream locks of events.ts's protocol: PostgreSQL's advisory lock on the stream's key,
 * held shared by each appender and exclusively by the gather until commit. SQLite needs none:
 * it runs one write transaction at a time.
 */

type Db = Kysely<Schema>;

const SQLITE = {
  lockStreamShared: async (_db: Db, _key: string): Promise<void> => {},
  lockStream: async (_db: Db, _key: string): Promise<void> => {},
};

const POSTGRES: typeof SQLITE = {
  lockStreamShared: async (db, key) => {
    await sql`select pg_advisory_xact_lock_shared(hashtextextended(${key}, 0))`.execute(db);
  },
  lockStream: async (db, key) => {
    await sql`select pg_advisory_xact_lock(hashtextextended(${key}, 0))`.execute(db);
  },
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
