import { randomUUID } from 'node:crypto';
import { sql, type Kysely, type RawBuilder, type Selectable, type SqlBool } from 'kysely';
import { chunkOf } from '../db/chunks.ts';
import type { ProcedureDatabase } from '../db/procedure.ts';
import { cursorCodec } from '../http/cursor.ts';
import type { DialectName } from '../db/database.ts';
import type { JobsTable, Schema } from '../db/schema.ts';

export type JobRow = Selectable<JobsTable>;

/** Epoch ms by the database's clock: leases are set and judged by one clock, whatever each host's says. */
export function databaseNow(dialect: DialectName) {
  return dialect === 'postgres'
    ? sql<number>`cast(extract(epoch from now()) * 1000 as bigint)`
    : sql<number>`cast(unixepoch('subsec') * 1000 as integer)`;
}

/**
 * Whether a queueing statement can wake other processes' workers itself: PostgreSQL's NOTIFY.
 * SQLite's workers share one process, where wakeups.ts tells them.
 */
export const NOTIFIES_OTHER_PROCESSES: Record<DialectName, boolean> = { sqlite: false, postgres: true };

/** What identifies one claim of one job: a lapsed claim's lease no longer matches. */
export interface Lease {
  id: number;
  token: string;
}

/** Lapsed leases after which a job is dead: it keeps killing (or hanging) its worker. */
export const MAX_LAPSES = 5;
/**
 * The wait before a job whose worker died runs again: 2 s doubling per lapse, so a job that kills
 * its process does not crash-loop.
 */
const LAPSE_BACKOFF_MS = 2000;
const LAPSED = 'the lease lapsed: the worker stopped or took too long';

/**
 * Takes up to `limit` ready jobs of a kind whose time has come, highest lane first, then
 * oldest, and leases them in one statement, each under a token of its own (the claim's
 * random id and the job's id).
 *
 * PostgreSQL: the CTE's FOR UPDATE SKIP LOCKED lets any number of workers claim at once
 * without waiting on one another or taking the same row, and the UPDATE joins only the
 * rows the CTE locked, so no plan can make it take more than `limit` (an `id in (subquery)`
 * may re-run the subquery under a nested loop). Claiming a batch a statement instead of a
 * row a statement is what makes 4 workers reach more than 5,000 jobs/s here.
 *
 * SQLite has one writer: the statement is atomic on its own, so it needs no locking clause.
 */
export async function claimJobs(db: Kysely<Schema>, dialect: DialectName, claim: Claim): Promise<JobRow[]> {
  return (await claimStatement(dialect, claim).execute(db)).rows;
}

export interface Claim {
  kind: string;
  limit: number;
  workerId: string;
  now: number;
  leaseMs: number;
  /** At most this many jobs of one account a claim (claimPerAccount); unset, the kind's order alone. */
  perAccount?: number;
}

/** claimJobs's statement, for a test to see its plan. */
export function claimStatement(dialect: DialectName, claim: Claim): RawBuilder<JobRow> {
  if (claim.perAccount !== undefined) return claimPerAccount(dialect, claim, claim.perAccount);
  const postgres = dialect === 'postgres';
  const token = randomUUID();
  return sql<JobRow>`
    with picked as (
      select id from jobs
       where state = 'ready' and kind = ${claim.kind} and run_at <= ${claim.now}
       order by priority, run_at, id
       limit ${claim.limit}
       ${postgres ? sql`for update skip locked` : sql``})
    update jobs
       set state = 'running', attempts = jobs.attempts + 1, leased_by = ${claim.workerId},
           lease_token = cast(${token} as text) || ':' || cast(jobs.id as text),
           lease_expires_at = ${databaseNow(dialect)} + ${claim.leaseMs}
      from picked
     where jobs.id = picked.id
    returning ${postgres ? sql`jobs.*` : sql`*`}`;
}

/**
 * Accounts a claim per account walks (claimPerAccount) besides those of the kind's oldest due
 * jobs: one index probe each, so the claim costs the same however many accounts have jobs queued.
 */
export const ACCOUNTS_WALKED = 32;

/**
 * The parts of claimPerAccount that differ. `due`: each walked account's first `perAccount` due
 * jobs, in the kind's order. SQLite has no LATERAL: a correlated `id in (…)` looks each one's
 * up by rowid. PostgreSQL's LATERAL locks them as claimJobs's CTE does: concurrent claims take
 * different jobs, and the UPDATE joins only rows locked here. `picked`: the UPDATE's rows. SQLite
 * joined to `from picked` scanned the whole table (it cannot tell how few the picks are); by
 * `id in` it looks them up.
 */
const PER_ACCOUNT = {
  sqlite: {
    due: (ready: RawBuilder<SqlBool>, now: number, perAccount: number) => sql`
      select j.id, j.account_id, j.priority, j.run_at
        from accounts a join jobs j on j.id in (
          select id from jobs
           where ${ready} and account_id = a.account_id and run_at <= ${now}
           order by priority, run_at, id limit ${perAccount})`,
    picked: sql`where jobs.id in (select id from picked) returning *`,
  },
  postgres: {
    due: (ready: RawBuilder<SqlBool>, now: number, perAccount: number) => sql`
      select due.* from accounts a cross join lateral (
        select id, account_id, priority, run_at from jobs
         where ${ready} and account_id = a.account_id and run_at <= ${now}
         order by priority, run_at, id limit ${perAccount}
         for update skip locked) due`,
    picked: sql`from picked where jobs.id = picked.id returning jobs.*`,
  },
};

/**
 * claimJobs for a kind shared fairly among accounts (webhook posts): at most `perAccount` jobs
 * of one account a claim, each account's in the kind's order, and the claim's places dealt
 * round the accounts: every account's first due job, in random order, then every account's
 * second, and so on. So one account's backlog of 100,000 due jobs, or its retries coming due,
 * never holds another account's job back a claim: claimJobs took them oldest first, and the
 * other account waited for the whole backlog to be claimed.
 *
 * The accounts: those of the kind's `limit` oldest due jobs, and ACCOUNTS_WALKED others, walked
 * in order of id from a random one (wrapping round), each a probe of the kind's partial index
 * by account (migration 0048, which a kind claimed so must have): the claim reads neither a
 * backlog nor every account with jobs queued. With more accounts than that, an account is
 * walked one claim in so many, or sooner once its job is among the oldest due.
 */
function claimPerAccount(dialect: DialectName, claim: Claim, perAccount: number): RawBuilder<JobRow> {
  const statements = PER_ACCOUNT[dialect];
  // The kind as a literal: SQLite takes a partial index only for a query whose terms imply it as written.
  const ready = sql<SqlBool>`state = 'ready' and kind = ${sql.lit(claim.kind)}`;
  const next = (after: RawBuilder<unknown>) =>
    sql`coalesce((select min(account_id) from jobs where ${ready} and account_id ${after}),
                 (select min(account_id) from jobs where ${ready}))`;
  const token = randomUUID();
  return sql<JobRow>`
    with recursive walked(account_id, step) as (
      select ${next(sql`>= ${randomUUID()}`)}, 1
      union all
      select ${next(sql`> walked.account_id`)}, walked.step + 1
        from walked where walked.account_id is not null and walked.step < ${ACCOUNTS_WALKED}),
    accounts as (
      select account_id from walked
      union
      select account_id from (
        select account_id from jobs where ${ready} and run_at <= ${claim.now}
         order by priority, run_at, id limit ${claim.limit}) oldest),
    due as (${statements.due(ready, claim.now, perAccount)}),
    picked as materialized (
      select id from (
        select id, priority, row_number() over (partition by account_id order by priority, run_at, id) as turn
          from due) dealt
       order by priority, turn, random()
       limit ${claim.limit})
    update jobs
       set state = 'running', attempts = jobs.attempts + 1, leased_by = ${claim.workerId},
           lease_token = cast(${token} as text) || ':' || cast(jobs.id as text),
           lease_expires_at = ${databaseNow(dialect)} + ${claim.leaseMs}
     ${statements.picked}`;
}

export function leaseOf(row: JobRow): Lease {
  return { id: row.id, token: row.lease_token! };
}

/**
 * Whether the claim still holds the job, answered in the caller's transaction, which then
 * holds the job's row until it ends: a lapsed claim cannot be taken over meanwhile. The caller
 * records progress (a page sent): the job's lapses are counted afresh from it, so that only a
 * job that keeps killing its worker without getting on dies of them, not a campaign that met
 * five restarts in its hours.
 */
export async function holdsJob(db: Kysely<Schema>, lease: Lease): Promise<boolean> {
  const held = await db
    .updateTable('jobs')
    .set({ lease_token: lease.token, lapses: 0 })
    .where('id', '=', lease.id)
    .where('lease_token', '=', lease.token)
    .executeTakeFirst();
  return Number(held.numUpdatedRows) === 1;
}

/** Finished jobs are deleted, but only under the claims that still hold them; answers how many were. */
export async function completeJobs(db: Kysely<Schema>, leases: Lease[]): Promise<number> {
  const result = await db
    .deleteFrom('jobs')
    .where(
      'id',
      'in',
      leases.map((lease) => lease.id),
    )
    .where(
      'lease_token',
      'in',
      leases.map((lease) => lease.token),
    )
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}

export async function extendLeases(
  db: Kysely<Schema>,
  dialect: DialectName,
  leases: Lease[],
  leaseMs: number,
): Promise<void> {
  await db
    .updateTable('jobs')
    .set({ lease_expires_at: sql<number>`${databaseNow(dialect)} + ${leaseMs}` })
    .where(
      'id',
      'in',
      leases.map((lease) => lease.id),
    )
    .where(
      'lease_token',
      'in',
      leases.map((lease) => lease.token),
    )
    .execute();
}

/**
 * Back to ready at `runAt`, or dead when `runAt` is null; a snoozed job gives back the
 * attempt its claim added. Answers whether the claim still held the job.
 */
export async function releaseJob(
  db: Kysely<Schema>,
  lease: Lease,
  outcome: { runAt: number | null; error: string; now: number; snoozed?: boolean },
): Promise<boolean> {
  const values =
    outcome.runAt === null
      ? { state: 'dead' as const, finished_at: outcome.now }
      : { state: 'ready' as const, run_at: outcome.runAt };
  const result = await db
    .updateTable('jobs')
    .set((eb) => ({
      ...values,
      ...(outcome.snoozed ? { attempts: eb('attempts', '-', 1) } : {}),
      leased_by: null,
      lease_token: null,
      lease_expires_at: null,
      last_error: outcome.error.slice(0, 2000),
    }))
    .where('id', '=', lease.id)
    .where('lease_token', '=', lease.token)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/**
 * The rescuer's first half: a job whose lease lapsed belongs to a worker that died (or hung
 * past its lease). That is not the job's failure: it gets its attempt back and runs again
 * after a backoff by its count of lapses, unless this lapse is its MAX_LAPSES-th (those are
 * left to lapsedToDeath, which runs their kind's onDead). Several workers may run this
 * together: each row changes once, the others find it no longer running.
 */
export async function rescueExpiredLeases(db: Kysely<Schema>, dialect: DialectName, now: number): Promise<void> {
  await sql`
    update jobs
       set state = 'ready', run_at = cast(${now} as bigint) + ${LAPSE_BACKOFF_MS} * (1 << lapses),
           lapses = lapses + 1, attempts = attempts - 1,
           leased_by = null, lease_token = null, lease_expires_at = null, last_error = ${LAPSED}
     where state = 'running' and lease_expires_at <= ${databaseNow(dialect)} and lapses < ${MAX_LAPSES - 1}`.execute(
    db,
  );
}

/** Lapsed jobs of these kinds whose lapse is their last: each to be marked dead by lapsedToDeath. */
export async function lapsingToDeath(db: Kysely<Schema>, dialect: DialectName, kinds: string[]): Promise<number[]> {
  if (kinds.length === 0) return [];
  const rows = await db
    .selectFrom('jobs')
    .select('id')
    .where('state', '=', 'running')
    .where('lease_expires_at', '<=', databaseNow(dialect))
    .where('lapses', '>=', MAX_LAPSES - 1)
    .where('kind', 'in', kinds)
    .execute();
  return rows.map((row) => row.id);
}

/** Marks one such job dead, in the caller's transaction; undefined if another rescuer did first. */
export async function lapsedToDeath(
  db: Kysely<Schema>,
  dialect: DialectName,
  id: number,
  now: number,
): Promise<JobRow | undefined> {
  return db
    .updateTable('jobs')
    .set((eb) => ({
      state: 'dead',
      finished_at: now,
      lapses: eb('lapses', '+', 1),
      attempts: eb('attempts', '-', 1),
      leased_by: null,
      lease_token: null,
      lease_expires_at: null,
      last_error: `${LAPSED}, ${MAX_LAPSES} times`,
    }))
    .where('id', '=', id)
    .where('state', '=', 'running')
    .where('lease_expires_at', '<=', databaseNow(dialect))
    .returningAll()
    .executeTakeFirst();
}

const jobCursor = cursorCodec(['integer']);

/** Jobs in a state, newest first, a page at a time: what an operator inspects, dead ones above all. */
export async function listJobs(
  db: Kysely<Schema>,
  filter: { state: JobRow['state']; kind?: string; limit: number; cursor?: string },
): Promise<{ jobs: JobRow[]; nextCursor: string | null }> {
  let query = db.selectFrom('jobs').selectAll().where('state', '=', filter.state);
  if (filter.kind !== undefined) query = query.where('kind', '=', filter.kind);
  if (filter.cursor !== undefined) query = query.where('id', '<', jobCursor.decode(filter.cursor)[0]);
  const read = await query
    .orderBy('id', 'desc')
    .limit(filter.limit + 1)
    .execute();
  const { rows, nextCursor } = jobCursor.page(read, filter.limit, (last) => [Number(last.id)]);
  return { jobs: rows, nextCursor };
}

/**
 * A dead job runs again now, with its attempts and lapses counted afresh; undefined if it is
 * not dead. Named by its id, or by its idempotency key.
 */
export async function reviveJob(
  db: Kysely<Schema>,
  job: { id: number } | { idempotencyKey: string },
  now: number,
): Promise<JobRow | undefined> {
  return db
    .updateTable('jobs')
    .set({ state: 'ready', attempts: 0, lapses: 0, run_at: now, finished_at: null })
    .where((eb) => ('id' in job ? eb('id', '=', job.id) : eb('idempotency_key', '=', job.idempotencyKey)))
    .where('state', '=', 'dead')
    .returningAll()
    .executeTakeFirst();
}

/**
 * Deletes up to `limit` jobs that died before `before`: kept for inspection, their kind's
 * domain row settled when they died (onDead). Answers how many it deleted.
 */
export async function purgeDeadJobs(
  { db, dialect }: ProcedureDatabase,
  before: number,
  limit: number,
): Promise<number> {
  // A job revived meanwhile is no longer dead, and stays.
  const dead = sql<SqlBool>`state = 'dead' and finished_at < ${before}`;
  const result = await db
    .deleteFrom('jobs')
    .where(dead)
    .where(chunkOf(dialect, 'jobs', dead, limit))
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
