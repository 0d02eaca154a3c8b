import { randomUUID } from 'node:crypto';
import { sql, type Kysely, type OperationNodeSource } from 'kysely';
import { dialectOf } from '../db/dialect.ts';
import type { Schema } from '../db/schema.ts';
import { afterCommit, notifyAfterCommit } from '../db/notifications.ts';
import { NOTIFIES_OTHER_PROCESSES } from './queries.ts';
import { announceJobs, JOBS_CHANNEL } from './wakeups.ts';

/**
 * Attempts before a failing job is dead. Each kind's limit is set where its jobs are
 * enqueued (the module that owns the kind passes its own maxAttempts), and stored on the
 * job, so the rescuer and every worker judge a job by the same number.
 */
export const DEFAULT_MAX_ATTEMPTS = 20;

/**
 * Lanes: within a kind, a claim takes the lowest number first, then the oldest, so a
 * one-time passcode never waits behind a 100,000-recipient campaign queued before it.
 */
export const PRIORITY = {
  /** A one-time passcode: `/sms/single` sent immediately. */
  otp: 1,
  /** A batch's fan-out and its deliveries: the ordinary lane, and the default. */
  fanout: 2,
  webhook: 3,
  contactBatch: 4,
} as const;

export interface NewJob {
  kind: string;
  payload: unknown;
  accountId?: string | null;
  /** Epoch ms, from the caller's clock: when it is queued (its createdAt). */
  now: number;
  /** Epoch ms: not before then. Default: now. */
  runAt?: number;
  /** A job whose key is already queued is not added again. Default: a fresh UUID. */
  idempotencyKey?: string;
  maxAttempts?: number;
  /** PRIORITY.fanout unless told. */
  priority?: number;
}

// Rows per INSERT: 10 parameters a row keeps a statement far below SQLite's 32,766 and
// PostgreSQL's 65,535 bound parameters.
const INSERT_CHUNK = 1000;

/** The INSERT of new jobs; a key already queued is left as it is. */
function jobsInsert(db: Kysely<Schema>, jobs: NewJob[]) {
  const rows = jobs.map((job) => ({
    kind: job.kind,
    account_id: job.accountId ?? null,
    payload: JSON.stringify(job.payload ?? null),
    state: 'ready' as const,
    max_attempts: job.maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
    priority: job.priority ?? PRIORITY.fanout,
    run_at: job.runAt ?? job.now,
    idempotency_key: job.idempotencyKey ?? randomUUID(),
    created_at: job.now,
    last_error: null,
  }));
  return db
    .insertInto('jobs')
    .values(rows)
    .onConflict((oc) => oc.column('idempotency_key').doNothing());
}

/**
 * PostgreSQL: one statement that adds the jobs, after `alongside`: further writes (INSERTs,
 * UPDATEs) run as data-modifying CTEs of the same statement, so a request's writes and its
 * job cost one round trip, atomic without a transaction of their own. `notify`: the
 * statement also wakes other processes' workers, one NOTIFY per kind added (delivered at
 * commit; none for a key already queued).
 */
function enqueueStatement(db: Kysely<Schema>, jobs: NewJob[], alongside: OperationNodeSource[], notify: boolean) {
  const insert = jobsInsert(db, jobs);
  if (alongside.length === 0 && !notify) return sql`${insert}`;
  const writes = alongside.map((write, i) => sql`${sql.ref(`write_${i}`)} as (${write})`);
  if (!notify) return sql`with ${sql.join(writes)} ${insert}`;
  return sql`with ${sql.join([...writes, sql`inserted as (${insert.returning('kind')})`])}
    select pg_notify(${JOBS_CHANNEL}, added.kind) as notified from (select distinct kind from inserted) added`;
}

/**
 * PostgreSQL: whether other processes' workers are told of `kinds` after the commit of the
 * procedure this runs in, by the database's notifier, rather than by a NOTIFY in the
 * queueing statement: a NOTIFY in the transaction would make its commit wait for every
 * other one that notifies (db/notifications.ts). Outside a procedure, the statement carries it.
 */
function notifiedAfterCommit(kinds: Set<string>): boolean {
  return [...kinds].every((kind) => notifyAfterCommit(JOBS_CHANNEL, kind));
}

/** Wakes this process's workers of `kinds`: once the procedure this runs in has committed, or now. */
function wakeLocalWorkers(kinds: Set<string>): void {
  if (!afterCommit(() => announceJobs(kinds))) announceJobs(kinds);
}

/**
 * Adds jobs in the given database or transaction. Called inside the transaction of the
 * request that answers 202, so the answer and its work commit together or not at all;
 * wakes the workers of the jobs' kinds.
 */
export async function enqueueMany(db: Kysely<Schema>, jobs: NewJob[]): Promise<void> {
  if (jobs.length === 0) return;
  const kinds = new Set(jobs.map((job) => job.kind));
  const notify = NOTIFIES_OTHER_PROCESSES[dialectOf(db)] && !notifiedAfterCommit(kinds);
  for (let start = 0; start < jobs.length; start += INSERT_CHUNK) {
    await enqueueStatement(db, jobs.slice(start, start + INSERT_CHUNK), [], notify).execute(db);
  }
  wakeLocalWorkers(kinds);
}

/**
 * PostgreSQL only: `writes` and the jobs that work on them, in one statement (enqueueStatement),
 * at most INSERT_CHUNK jobs. What a request that writes little pays per round trip is most of
 * its cost there.
 */
export async function enqueueWithWrites(
  db: Kysely<Schema>,
  jobs: NewJob[],
  writes: OperationNodeSource[],
): Promise<void> {
  if (jobs.length > INSERT_CHUNK) throw new Error(`at most ${INSERT_CHUNK} jobs go with writes in one statement`);
  const kinds = new Set(jobs.map((job) => job.kind));
  await enqueueStatement(db, jobs, writes, !notifiedAfterCommit(kinds)).execute(db);
  wakeLocalWorkers(kinds);
}

export async function enqueue(db: Kysely<Schema>, job: NewJob): Promise<void> {
  await enqueueMany(db, [job]);
}
