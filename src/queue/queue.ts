import { randomUUID } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import { isPostgres } from '../db/dialect.ts';
import type { Schema } from '../db/schema.ts';
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
  /** Epoch ms, from the caller's clock: not before then. */
  runAt: number;
  /** A job whose key is already queued is not added again. Default: a fresh UUID. */
  idempotencyKey?: string;
  maxAttempts?: number;
  /** PRIORITY.fanout unless told. */
  priority?: number;
}

// Rows per INSERT: 10 parameters a row keeps a statement far below SQLite's 32,766 and
// PostgreSQL's 65,535 bound parameters.
const INSERT_CHUNK = 1000;

/**
 * Adds jobs in the given database or transaction. Called inside the transaction of the
 * request that answers 202, so the answer and its work commit together or not at all;
 * wakes the workers of the jobs' kinds.
 */
export async function enqueueMany(db: Kysely<Schema>, jobs: NewJob[]): Promise<void> {
  for (let start = 0; start < jobs.length; start += INSERT_CHUNK) {
    const rows = jobs.slice(start, start + INSERT_CHUNK).map((job) => ({
      kind: job.kind,
      account_id: job.accountId ?? null,
      payload: JSON.stringify(job.payload ?? null),
      state: 'ready' as const,
      max_attempts: job.maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
      priority: job.priority ?? PRIORITY.fanout,
      run_at: job.runAt,
      idempotency_key: job.idempotencyKey ?? randomUUID(),
      created_at: job.runAt,
      last_error: null,
    }));
    const insert = db
      .insertInto('jobs')
      .values(rows)
      .onConflict((oc) => oc.column('idempotency_key').doNothing());
    if (isPostgres(db)) {
      // Other processes' workers are woken by the insert itself, one NOTIFY per kind added
      // (delivered at commit): no round trip of its own, and none for a key already queued.
      await db
        .with('inserted', () => insert.returning('kind'))
        .selectFrom((eb) => eb.selectFrom('inserted').select('kind').distinct().as('added'))
        .select(sql<string>`pg_notify(${JOBS_CHANNEL}, added.kind)`.as('notified'))
        .execute();
    } else {
      await insert.execute();
    }
  }
  if (jobs.length > 0) announceJobs(new Set(jobs.map((job) => job.kind)));
}

export async function enqueue(db: Kysely<Schema>, job: NewJob): Promise<void> {
  await enqueueMany(db, [job]);
}
