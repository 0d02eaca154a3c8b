import { sql, type Kysely } from 'kysely';
import type { Schema } from '../db/schema.ts';

/**
 * Verify's SQL that differs by database. `lockKeys`: the caller's transaction holds each of
 * `keys` until it ends, so the limits counted under one (record.ts) see every verification
 * committed before. Taken in one statement, in the order of the locks' ids, so two groups
 * that share keys never each hold one the other waits for. SQLite needs none: its one
 * connection runs each transaction whole, one at a time.
 */
export const queries = {
  sqlite: {
    async lockKeys(_trx: Kysely<Schema>, _keys: string[]): Promise<void> {},
  },
  postgres: {
    async lockKeys(trx: Kysely<Schema>, keys: string[]): Promise<void> {
      // A volatile function of the select list runs after the ORDER BY, so in the ids' order.
      await sql`select pg_advisory_xact_lock(id) from (
          select distinct hashtextextended(key, 0) as id from unnest(${keys}::text[]) as key
        ) as locks order by id`.execute(trx);
    },
  },
};
