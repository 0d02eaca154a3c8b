import { sql, type CompiledQuery, type Kysely } from 'kysely';
import { jsonArrayFrom } from 'kysely/helpers/sqlite';
import { isAnyOf } from '../db/in-json.ts';
import { PLAN_ONCE } from '../db/prepared.ts';
import type { Schema, VerificationSendsTable, VerificationsTable } from '../db/schema.ts';

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
 * `lockPending`: the caller's transaction holds the pending verifications of these numbers,
 * in the ids' order, before a group of starts reads them: a check or a cancel that ends one
 * meanwhile commits first, and the start then sees it ended (and makes a new one), where it
 * would have sent the ended one a new code. SQLite needs none (above).
 *
 * `limitRows`: the statement of what a group of starts' limits count (record.ts, countsOf),
 * each list a JSON array (SQLite's as text, for ParseJSONResultsPlugin). On PostgreSQL each
 * number and prefix is looked up on its own (a lateral join), the newest rows its limit looks
 * at and no more, in the order of its index: a number's pending verification, its last codes, a
 * prefix's last verifications up to the account's prefixLimit. Given the arrays of accounts and
 * numbers as conditions, the planner's choice followed the statistics: an account with few
 * verifications when they were last taken was read by account alone, every one of its
 * verifications a start (4.9 ms at 5,000, against 0.4 so), which is what an account that
 * suddenly sends many codes (an attack of SMS pumping) would meet; and a prefix under attack
 * was read whole within the window. The window's start is a row comparison with the index's
 * columns, which only the index on the number (or prefix) can take: as a plain `at >` (or
 * `created_at >`) PostgreSQL read the index of every account's codes (or verifications) by time
 * instead when the statistics made the window look small. The plan is the same whatever the
 * tables hold: planned once. On SQLite the accounts and numbers are given as lists (the pairs
 * among them sorted out by the caller), and the index on the number holds created_at (0032).
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
    limitRows(db: Kysely<Schema>, keys: LimitKeys): CompiledQuery<LimitRows> {
      const anyOf = (column: string, values: string[]) => isAnyOf('sqlite', column, [...new Set(values)]);
      const accounts = anyOf(
        'account_id',
        keys.numbers.map(([account]) => account),
      );
      const numbers = anyOf(
        'recipient',
        keys.numbers.map(([, number]) => number),
      );
      const prefixAccounts = anyOf(
        'account_id',
        keys.prefixes.map(([account]) => account),
      );
      const prefixes = anyOf(
        'prefix',
        keys.prefixes.map(([, prefix]) => prefix),
      );
      return db
        .selectNoFrom((eb) => [
          jsonArrayFrom(
            eb
              .selectFrom('verifications')
              .select(VERIFICATION_COLUMNS)
              .where(accounts)
              .where(numbers)
              .where('status', '=', 'pending'),
          ).as('pending'),
          jsonArrayFrom(
            eb
              .selectFrom('verification_sends')
              .select(['account_id', 'recipient', 'at'])
              .where(accounts)
              .where(numbers)
              .where('at', '>', keys.since),
          ).as('sends'),
          jsonArrayFrom(
            eb
              .selectFrom('verifications')
              .select(['account_id', 'prefix', 'created_at'])
              .where(prefixAccounts)
              .where(prefixes)
              .where('created_at', '>', keys.since),
          ).as('made'),
        ])
        .compile();
    },
    async lockKeys(_trx: Kysely<Schema>, _keys: string[]): Promise<void> {},
    async lockRows(_trx: Kysely<Schema>, _ids: string[]): Promise<void> {},
    async lockPending(_trx: Kysely<Schema>, _numbers: Array<[string, string]>): Promise<void> {},
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
    limitRows(db: Kysely<Schema>, keys: LimitKeys): CompiledQuery<LimitRows> {
      const [accounts, numbers] = [keys.numbers.map(([account]) => account), keys.numbers.map(([, number]) => number)];
      const [prefixAccounts, prefixes] = [keys.prefixes.map(([a]) => a), keys.prefixes.map(([, prefix]) => prefix)];
      const most = keys.prefixes.map(([, , limit]) => limit);
      const since = sql`${keys.since}::bigint`;
      return sql<LimitRows>`${sql.raw(PLAN_ONCE)} select
          (select coalesce(json_agg(v), '[]')
             from unnest(${accounts}::text[], ${numbers}::text[]) as k(account_id, recipient)
             cross join lateral (
               select * from verifications v
                where v.account_id = k.account_id and v.recipient = k.recipient and v.status = 'pending'
                order by v.created_at desc limit 1) v) as pending,
          (select coalesce(json_agg(s), '[]')
             from unnest(${accounts}::text[], ${numbers}::text[]) as k(account_id, recipient)
             cross join lateral (
               select s.account_id, s.recipient, s.at from verification_sends s
                where (s.account_id, s.recipient) = (k.account_id, k.recipient)
                  and (s.account_id, s.recipient, s.at) > (k.account_id, k.recipient, ${since})
                order by s.at desc limit ${keys.mostSends}::integer) s) as sends,
          (select coalesce(json_agg(m), '[]')
             from unnest(${prefixAccounts}::text[], ${prefixes}::text[], ${most}::integer[])
                  as k(account_id, prefix, most)
             cross join lateral (
               select m.account_id, m.prefix, m.created_at from verifications m
                where (m.account_id, m.prefix) = (k.account_id, k.prefix)
                  and (m.account_id, m.prefix, m.created_at) > (k.account_id, k.prefix, ${since})
                order by m.created_at desc limit k.most) m) as made`.compile(db);
    },
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
    async lockPending(trx: Kysely<Schema>, numbers: Array<[string, string]>): Promise<void> {
      await sql`select v.id from unnest(${numbers.map(([account]) => account)}::text[],
                                         ${numbers.map(([, number]) => number)}::text[]) as k(account_id, recipient)
                  join verifications v on v.account_id = k.account_id and v.recipient = k.recipient
                 where v.status = 'pending'
                 order by v.id for update of v`.execute(trx);
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

/**
 * What a group of starts' limits count: its [accountId, number] pairs, its [accountId, prefix,
 * the account's prefixLimit] triples, since when, and how many codes to a number the limit
 * allows. A read may give only the newest of each that a limit looks at (PostgreSQL's does):
 * the pending verification, the last `mostSends` codes, the last prefixLimit verifications.
 */
export interface LimitKeys {
  numbers: Array<[string, string]>;
  prefixes: Array<[string, string, number]>;
  since: number;
  mostSends: number;
}

/** The pending verifications of the numbers, the codes sent to them and those made to the prefixes. */
export interface LimitRows {
  pending: VerificationsTable[];
  sends: Array<Pick<VerificationSendsTable, 'account_id' | 'recipient' | 'at'>>;
  made: Array<Pick<VerificationsTable, 'account_id' | 'prefix' | 'created_at'>>;
}

/** Every column of a verification, named: SQLite's JSON object of a row names its fields. */
const VERIFICATION_COLUMNS = [
  'id',
  'account_id',
  'channel',
  'recipient',
  'country',
  'prefix',
  'status',
  'attempts_left',
  'send_attempts',
  'code_hash',
  'last_sent_at',
  'expires_at',
  'webhook_url',
  'created_at',
  'ended_at',
] as const satisfies ReadonlyArray<keyof VerificationsTable>;

/** The checks' terms as rows, from one JSON parameter. */
const sqliteTerms = (checks: CheckTerms[]) =>
  sql`select value ->> 'id' as id, value ->> 'account_id' as account_id, value ->> 'code_hash' as code_hash,
    value ->> 'now' as now from json_each(${JSON.stringify(checks)})`;
