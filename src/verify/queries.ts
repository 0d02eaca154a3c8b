import { sql, type Kysely } from 'kysely';
import type { Schema } from '../db/schema.ts';

/**
 * Verify's SQL that differs by database. `lockKey`: the caller's transaction holds `key` until
 * it ends, so the limits counted under it (record.ts) see every verification committed before.
 * SQLite needs none: its one connection runs each transaction whole, one at a time.
 */
export const queries = {
  sqlite: {
    async lockKey(_trx: Kysely<Schema>, _key: string): Promise<void> {},
  },
  postgres: {
    async lockKey(trx: Kysely<Schema>, key: string): Promise<void> {
      await sql`select pg_advisory_xact_lock(hashtextextended(${key}, 0))`.execute(trx);
    },
  },
};
