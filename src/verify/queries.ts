import { sql, type Kysely } from 'kysely';
import { jsonArrayFrom as postgresRowsOf } from 'kysely/helpers/postgres';
import { jsonArrayFrom as sqliteRowsOf } from 'kysely/helpers/sqlite';
import type { Schema, VerificationsTable } from '../db/schema.ts';

/** One check's terms, as the row must still meet them when written (record.ts, checkOne's conditions). */
export interface CheckTerms {
  id: string;
  account_id: string;
  /** The hash the check's code matched: an approval only. */
  code_hash?: string;
  now: number;
}

/**
 * Verify's SQL that differs by database.
 *
 * `lockKeys`: the caller's transaction holds each of `keys` until it ends, so the limits counted
 * under one (record.ts) see every verification committed before. Taken in one statement, in
 * the order of the locks' ids, so two groups that share keys never each hold one the other
 * waits for. SQLite needs none: its one connection runs each transaction whole, one at a time.
 *
 * `lockRows`: the caller's transaction holds the rows of `ids` until it ends, taken in the ids'
 * order before a group of checks writes any. A group approves some rows and takes attempts from
 * others in two statements; another process's group checking the same two verifications the
 * other way round would lock them in the other order, and the two would wait on each other
 * until PostgreSQL broke the deadlock a second later. SQLite needs none (above).
 *
 * `rowsOf`: a select's rows as one JSON array, for a read of several lists in one statement
 * (record.ts, countsOf); the reader parses SQLite's JSON text (ParseJSONResultsPlugin).
 *
 * `approve` and `takeAttempts`: a check each of verifications all different, in one statement
 * whose conditions on each row are the whole decision, with the check's own terms joined from
 * one JSON parameter (one statement text whatever the count). They answer the rows they
 * changed, as changed: approved, or with an attempt fewer (failed, at the last).
 *
 * Each is planned to look the rows up by id, whatever the tables' statistics: without any,
 * both planners took verifications_expiry (status) instead and read every pending
 * verification against the checks (at 36,000 to 40,000 pending: SQLite 537 ms a group of 30,
 * PostgreSQL 10 ms a group of 2, against 0.4 and 0.3 ms by id). On PostgreSQL the ids are
 * given as an array besides, which it looks up in the primary key; on SQLite the unary `+`
 * keeps status and expires_at from taking an index.
 */
export const queries = {
  sqlite: {
    rowsOf: sqliteRowsOf,
    async lockKeys(_trx: Kysely<Schema>, _keys: string[]): Promise<void> {},
    async lockRows(_trx: Kysely<Schema>, _ids: string[]): Promise<void> {},
    async approve(db: Kysely<Schema>, checks: CheckTerms[]): Promise<VerificationsTable[]> {
      const { rows } = await sql<VerificationsTable>`update verifications set status = 'approved', ended_at = c.now
        from (${sqliteTerms(checks)}) as c
        where verifications.id = c.id and verifications.account_id = c.account_id
          and verifications.code_hash = c.code_hash and +verifications.status = 'pending'
          and +verifications.expires_at > c.now
        returning *`.execute(db);
      return rows;
    },
    async takeAttempts(db: Kysely<Schema>, checks: CheckTerms[]): Promise<VerificationsTable[]> {
      const { rows } = await sql<VerificationsTable>`update verifications set attempts_left = attempts_left - 1,
          status = case when attempts_left = 1 then 'failed' else status end,
          ended_at = case when attempts_left = 1 then c.now else ended_at end
        from (${sqliteTerms(checks)}) as c
        where verifications.id = c.id and verifications.account_id = c.account_id
          and +verifications.status = 'pending' and +verifications.expires_at > c.now
          and verifications.attempts_left > 0
        returning *`.execute(db);
      return rows;
    },
  },
  postgres: {
    rowsOf: postgresRowsOf,
    async lockKeys(trx: Kysely<Schema>, keys: string[]): Promise<void> {
      // A volatile function of the select list runs after the ORDER BY, so in the ids' order.
      await sql`select pg_advisory_xact_lock(id) from (
          select distinct hashtextextended(key, 0) as id from unnest(${keys}::text[]) as key
        ) as locks order by id`.execute(trx);
    },
    async lockRows(trx: Kysely<Schema>, ids: string[]): Promise<void> {
      // Locked as the sort hands them over, so in the ids' order.
      await sql`select id from verifications where id = any(${ids}::text[]) order by id for update`.execute(trx);
    },
    async approve(db: Kysely<Schema>, checks: CheckTerms[]): Promise<VerificationsTable[]> {
      const { rows } = await sql<VerificationsTable>`update verifications as v set status = 'approved', ended_at = c.now
        from jsonb_to_recordset(${JSON.stringify(checks)}::jsonb)
          as c(id text, account_id text, code_hash text, now bigint)
        where v.id = any(${checks.map((check) => check.id)}::text[])
          and v.id = c.id and v.account_id = c.account_id and v.code_hash = c.code_hash
          and v.status = 'pending' and v.expires_at > c.now
        returning v.*`.execute(db);
      return rows;
    },
    async takeAttempts(db: Kysely<Schema>, checks: CheckTerms[]): Promise<VerificationsTable[]> {
      const { rows } = await sql<VerificationsTable>`update verifications as v set attempts_left = v.attempts_left - 1,
          status = case when v.attempts_left = 1 then 'failed' else v.status end,
          ended_at = case when v.attempts_left = 1 then c.now else v.ended_at end
        from jsonb_to_recordset(${JSON.stringify(checks)}::jsonb) as c(id text, account_id text, now bigint)
        where v.id = any(${checks.map((check) => check.id)}::text[]) and v.id = c.id and v.account_id = c.account_id
          and v.status = 'pending' and v.expires_at > c.now and v.attempts_left > 0
        returning v.*`.execute(db);
      return rows;
    },
  },
};

/** The checks' terms as rows, from one JSON parameter. */
const sqliteTerms = (checks: CheckTerms[]) =>
  sql`select value ->> 'id' as id, value ->> 'account_id' as account_id, value ->> 'code_hash' as code_hash,
    value ->> 'now' as now from json_each(${JSON.stringify(checks)})`;
