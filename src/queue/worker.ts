import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Clock } from '../clock.ts';
import type { Database } from '../db/database.ts';
import { inBackground } from '../db/priority.ts';
import type { Schema } from '../db/schema.ts';
import { retryDelayMs } from './backoff.ts';
import { listenForJobs, nextRunAt, onJobsQueued } from './wakeups.ts';
import {
  claimJobs,
  completeJobs,
  holdsJob,
  extendLeases,
  lapsedToDeath,
  lapsingToDeath,
  leaseOf,
  MAX_LAPSES,
  releaseJob,
  rescueExpiredLeases,
  type JobRow,
  type Lease,
} from './queries.ts';

export interface Job {
  id: number;
  kind: string;
  payload: unknown;
  accountId: string | null;
  /** 1 on the first run; snoozes and runs whose worker died do not count. */
  attempt: number;
  maxAttempts: number;
  /**
   * Stable across reruns: a handler whose work committed but whose completion was never
   * recorded (the worker died in between) finds its own earlier work by this key.
   */
  idempotencyKey: string;
}

export interface JobRun {
  /**
   * Aborted when the worker starts stopping: a handler that can stop early does, and one
   * that cannot has the grace period to finish before its worker exits without it.
   */
  signal: AbortSignal;
  /** This run's claim of the job, for completeJob. */
  lease: Lease;
}

/**
 * Resolving completes the job; throwing retries it with backoff until it is dead;
 * throwing SnoozeJob runs it again later without spending an attempt.
 * Resolving 'completed' says the handler completed it itself, with completeJob.
 */
export interface JobHandler {
  // biome-ignore lint/suspicious/noConfusingVoidType: a handler that completes nothing itself returns nothing
  handle(job: Job, run: JobRun): Promise<void | 'completed'>;
  /**
   * What becomes of the kind's domain row when a job dies (its last attempt failed, or its
   * lease lapsed MAX_LAPSES times), run in the transaction that marks the job dead, so a
   * job never dies leaving its row waiting. A kind with a domain row must declare it.
   */
  onDead?(trx: Kysely<Schema>, job: Job, error: string): Promise<void>;
  /**
   * Run by every worker that registers the kind when it starts, before it claims anything: a
   * kind that must always have a job (a recurring one, recurring.ts) queues it here, in a way
   * that adds nothing when another process already did.
   */
  onStart?(db: Kysely<Schema>, now: number): Promise<void>;
}

/** Thrown in a job's last transaction to undo it: another worker holds the job now. */
class NoLongerHeld extends Error {}

/**
 * Completes a job in its handler's own transaction: the job is gone if and only if that
 * transaction commits, so the work cannot commit without its completion (and run again
 * after a crash in between). Call it last in the transaction, and resolve the handler with
 * 'completed' once the transaction has committed. Throws, so that the work rolls back, if
 * the lease lapsed and another worker holds the job now.
 */
export async function completeJob(trx: Kysely<Schema>, lease: Lease): Promise<void> {
  if ((await completeJobs(trx, [lease])) === 0) throw new Error(`job ${lease.id} is no longer held by this claim`);
}

/**
 * completeJob's counterpart for a run whose work commits but whose job stays (to be snoozed
 * or run again): throws, so that the work rolls back, if the lease lapsed and another worker
 * holds the job now.
 */
export async function keepJob(trx: Kysely<Schema>, lease: Lease): Promise<void> {
  if (!(await holdsJob(trx, lease))) throw new Error(`job ${lease.id} is no longer held by this claim`);
}

/**
 * Thrown by a handler to run the job again at `at` without spending an attempt (River's
 * JobSnooze): a handler that keeps its own schedule and count (webhook posts), or one
 * waiting for something that is not a failure of the job.
 */
export class SnoozeJob extends Error {
  readonly at: number;
  constructor(at: number, reason = 'snoozed by its handler') {
    super(reason);
    this.at = at;
  }
}

export interface KindOptions {
  /** Jobs of this kind running at once in this worker. */
  concurrency?: number;
  /**
   * Claimed and run ahead of other kinds' work where the database takes work in turn
   * (SQLite's one connection, db/priority.ts), as the API's requests are: one-time passcodes.
   * Other kinds run in the background there.
   */
  urgent?: boolean;
  /**
   * At most this many of one account's jobs a claim, the claim's places dealt round the accounts
   * with jobs due (queries.ts, claimPerAccount): one account's backlog never holds another's job
   * back. The kind needs an index for it (migration 0048). Unset: oldest first, whoever's.
   */
  perAccount?: number;
}

export interface WorkerOptions {
  database: Database;
  clock: Clock;
  log?: { warn(object: object, message: string): void; error(object: object, message: string): void };
  /** How long a claim holds a job, by the database's clock; renewed every third of it while the job runs. */
  leaseMs?: number;
  /**
   * Longest idle wait between claims of a kind: a fallback, since queued jobs wake their
   * workers (wakeups.ts) and a worker sleeps only until its kind's next scheduled job.
   */
  pollMs?: number;
  /**
   * On stop, how long running jobs may take to finish; a job still running then is left to
   * its lease, which lapses so that another worker takes it.
   */
  shutdownGraceMs?: number;
  random?: () => number;
  /** Told when a kind's loop starts to wait for work, and for at most how long: tests wait on it, not on time. */
  onIdle?: (kind: string, ms: number) => void;
}

interface Kind {
  name: string;
  handler: JobHandler;
  concurrency: number;
  urgent: boolean;
  perAccount: number | undefined;
  running: number;
  /** Resolves the idle wait early when a slot frees or a job is queued. */
  wake: (() => void) | undefined;
  /** Woken while claiming: the next idle wait ends at once, or a job queued meanwhile would wait a poll. */
  woken: boolean;
}

const DEFAULT_LEASE_MS = 30_000;
/**
 * The shortest idle wait after a short claim: a ready job already due that the claim did not
 * get is held by another worker's claim that is about to commit, not worth a busy loop.
 */
const MIN_WAIT_MS = 10;

/** A job this worker runs: its claim, renewed by the heartbeat, and the run, awaited at stop. */
interface Running {
  lease: Lease;
  finished: Promise<void>;
}

/**
 * Runs queued jobs: per kind, claims as many as it has free slots (in one statement),
 * runs them, and completes them in batches. A heartbeat renews the leases of running
 * jobs; a rescuer returns jobs whose lease lapsed (their worker died) to the queue.
 */
export class Worker {
  readonly id = randomUUID();
  private readonly kinds = new Map<string, Kind>();
  private readonly options: Required<Omit<WorkerOptions, 'log' | 'onIdle'>> & Pick<WorkerOptions, 'log' | 'onIdle'>;
  private readonly running = new Map<number, Running>();
  private readonly abort = new AbortController();
  private pendingCompletions: Lease[] = [];
  private flushing: Promise<unknown> | undefined;
  private timers: NodeJS.Timeout[] = [];
  /** Heartbeats and rescues under way: stop() waits for them, so none runs on a closed database. */
  private readonly bookkeeping = new Set<Promise<void>>();
  private loops: Promise<void>[] = [];
  private stopping = false;
  private readonly resources: Array<{ close(): Promise<void> }> = [];
  private stopListening: Array<() => unknown> = [];

  constructor(options: WorkerOptions) {
    this.options = {
      leaseMs: DEFAULT_LEASE_MS,
      pollMs: 5000,
      shutdownGraceMs: 30_000,
      random: Math.random,
      ...options,
    };
  }

  register(kind: string, handler: JobHandler, options: KindOptions = {}): void {
    this.kinds.set(kind, {
      name: kind,
      handler,
      concurrency: options.concurrency ?? 10,
      urgent: options.urgent ?? false,
      perAccount: options.perAccount,
      running: 0,
      wake: undefined,
      woken: false,
    });
  }

  /**
   * Resolves once every kind's onStart is done and its loop runs; rejects, running nothing,
   * if one of them fails (the process should not serve without its standing jobs).
   */
  async start(): Promise<void> {
    const { database, clock } = this.options;
    for (const kind of this.kinds.values()) await kind.handler.onStart?.(database.db, clock.now());
    const { leaseMs } = this.options;
    this.timers.push(setInterval(() => void this.guard(this.heartbeat()), leaseMs / 3));
    this.timers.push(setInterval(() => void this.guard(this.rescue()), leaseMs / 2));
    void this.guard(this.rescue());
    this.stopListening.push(onJobsQueued((kind) => this.wake(kind)));
    const { connectListener, notifierProcessId } = this.options.database;
    if (connectListener)
      this.stopListening.push(
        listenForJobs(connectListener, (kind) => this.wake(kind), {
          ownNotifier: notifierProcessId,
          log: this.options.log,
        }),
      );
    for (const kind of this.kinds.values())
      this.loops.push(kind.urgent ? this.loop(kind) : inBackground(() => this.loop(kind)));
  }

  /** Closed by stop() once running jobs are done with it: what handlers share, such as an SMS transport's binds. */
  holds(resource: { close(): Promise<void> }): void {
    this.resources.push(resource);
  }

  /**
   * Stops claiming, aborts running jobs' signals, and waits for them within the grace
   * period; a handler that ignores its signal is abandoned then, its lease no longer renewed.
   * Then closes what it holds.
   */
  async stop(): Promise<void> {
    this.stopping = true;
    this.abort.abort();
    await Promise.all(this.stopListening.map((stop) => stop()));
    for (const kind of this.kinds.values()) kind.wake?.();
    await Promise.all(this.loops);
    let grace: NodeJS.Timeout | undefined;
    const graceOver = new Promise<void>((resolve) => (grace = setTimeout(resolve, this.options.shutdownGraceMs)));
    await Promise.race([Promise.allSettled([...this.running.values()].map((run) => run.finished)), graceOver]);
    clearTimeout(grace);
    for (const timer of this.timers) clearInterval(timer);
    await Promise.all([this.flushing, ...this.bookkeeping]);
    await Promise.all(this.resources.map((resource) => resource.close()));
  }

  /**
   * Runs every job that can be claimed now, kind by kind, until none is left; returns how
   * many ran. For tests and the CLI: no timers, time only from the clock.
   */
  async drain(): Promise<number> {
    let total = 0;
    for (;;) {
      await this.rescue();
      let claimed = 0;
      for (const kind of this.kinds.values()) {
        const claimAndRun = async () => {
          const jobs = await this.claim(kind, kind.concurrency);
          await Promise.all(jobs.map((job) => this.run(kind, job)));
          return jobs.length;
        };
        claimed += await (kind.urgent ? claimAndRun() : inBackground(claimAndRun));
      }
      if (claimed === 0) return total;
      total += claimed;
    }
  }

  /** Wakes the kind's loop, or every kind's when the kind is not known (wake-ups were lost). */
  private wake(name: string | undefined): void {
    for (const kind of this.kinds.values()) {
      if (name !== undefined && kind.name !== name) continue;
      kind.woken = true;
      kind.wake?.();
    }
  }

  private async loop(kind: Kind): Promise<void> {
    while (!this.stopping) {
      kind.woken = false;
      const free = kind.concurrency - kind.running;
      // Full: a finishing job wakes the loop.
      if (free === 0) {
        await this.idle(kind, this.options.pollMs);
        continue;
      }
      try {
        const jobs = await this.claim(kind, free);
        for (const job of jobs) void this.run(kind, job);
        // A full claim means more may be waiting: claim again as soon as a slot frees.
        if (jobs.length < free) await this.idleUntilDue(kind);
      } catch (error) {
        this.options.log?.error({ err: error, kind: kind.name }, 'claiming jobs failed');
        await this.idle(kind, this.options.pollMs);
      }
    }
  }

  /**
   * After a short claim, which took every job due: waits until the kind's next scheduled job
   * is due or a job is queued, at most the poll. Under load most waits end within the first
   * MIN_WAIT_MS (another job is queued), so the next due time is asked for only once a wait
   * has lasted that long, not after every claim.
   */
  private async idleUntilDue(kind: Kind): Promise<void> {
    const { pollMs, clock, database } = this.options;
    await this.idle(kind, Math.min(MIN_WAIT_MS, pollMs));
    if (kind.woken || this.stopping || pollMs <= MIN_WAIT_MS) return;
    const next = await nextRunAt(database.db, kind.name);
    const rest = Math.min(pollMs - MIN_WAIT_MS, next === undefined ? Infinity : next - clock.now());
    if (rest > 0) await this.idle(kind, rest);
  }

  private idle(kind: Kind, ms: number): Promise<void> {
    if (kind.woken || this.stopping) return Promise.resolve();
    this.options.onIdle?.(kind.name, ms);
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        kind.wake = undefined;
        resolve();
      }
      kind.wake = done;
    });
  }

  private async claim(kind: Kind, limit: number): Promise<JobRow[]> {
    const rows = await claimJobs(this.options.database.db, this.options.database.dialect, {
      kind: kind.name,
      limit,
      workerId: this.id,
      now: this.options.clock.now(),
      leaseMs: this.options.leaseMs,
      perAccount: kind.perAccount,
    });
    kind.running += rows.length;
    return rows;
  }

  /**
   * Runs a claimed job, holding its lease in `running` until it is done. The slot it frees
   * wakes its kind's loop only if the loop waits for one: after a short claim it waits for
   * jobs, and a claim now would find none.
   */
  private run(kind: Kind, row: JobRow): Promise<void> {
    const lease = leaseOf(row);
    const finished = this.handle(kind, jobOf(row), lease).finally(() => {
      // The job's lease lapsed and this worker claimed it again: that run holds the entry now.
      if (this.running.get(lease.id)?.lease === lease) this.running.delete(lease.id);
      const wasFull = kind.running === kind.concurrency;
      kind.running -= 1;
      if (wasFull) kind.wake?.();
    });
    this.running.set(lease.id, { lease, finished });
    return finished;
  }

  private async handle(kind: Kind, job: Job, lease: Lease): Promise<void> {
    let outcome: Awaited<ReturnType<JobHandler['handle']>>;
    try {
      outcome = await kind.handler.handle(job, { signal: this.abort.signal, lease });
    } catch (error) {
      await this.guard(this.fail(kind, job, lease, error));
      return;
    }
    // The job's work is done: a completion that fails (the database, for a moment) is no
    // failure of the job's, to spend an attempt or run onDead over work that committed. The
    // job keeps its lease, which lapses and gives it back without an attempt.
    if (outcome !== 'completed') await this.guard(this.complete(lease));
  }

  private async fail(kind: Kind, job: Job, lease: Lease, error: unknown): Promise<void> {
    const { db } = this.options.database;
    const now = this.options.clock.now();
    const message = error instanceof Error ? error.message : messageOf(error);
    if (error instanceof SnoozeJob) {
      await releaseJob(db, lease, { runAt: error.at, error: message, now, snoozed: true });
      // Due already (a webhook gather that left events behind): its kind's loop, asleep
      // until the poll since its last claim, claims it again now. Without this a stream
      // behind by 100,000 events was gathered 5,000 a poll, and its last post came 25 s late.
      if (error.at <= now) this.wake(kind.name);
      return;
    }
    const failed = { err: error, jobId: job.id, kind: job.kind, attempt: job.attempt };
    if (job.attempt < job.maxAttempts) {
      // A warning: the queue tries again by itself. Only the last attempt is an error (then `job dead`).
      const retryInMs = retryDelayMs(job.attempt, this.options.random());
      this.options.log?.warn({ ...failed, retryInMs }, 'job failed');
      await releaseJob(db, lease, { runAt: now + retryInMs, error: message, now });
      return;
    }
    this.options.log?.error(failed, 'job failed');
    // The handler's onDead first, then the job's row: onDead may queue a webhook gather, which
    // waits for a heartbeat renewing that gather's lease, and the heartbeat renews this job in
    // the same statement (webhooks/events.ts, EventsAhead). A job no longer held undoes it all.
    const died = await db
      .transaction()
      .execute(async (trx) => {
        if (kind.handler.onDead) await kind.handler.onDead(trx, job, message);
        if (!(await releaseJob(trx, lease, { runAt: null, error: message, now }))) throw new NoLongerHeld();
        return true;
      })
      .catch((error: unknown) => {
        if (error instanceof NoLongerHeld) return false;
        throw error;
      });
    if (died) this.dead(job, `its last attempt (${job.attempt} of ${job.maxAttempts}) failed`);
  }

  /**
   * A job no worker runs again until an operator revives it: an error line naming it (its
   * error is the "job failed" line before, and on the row), since whatever it was doing for
   * its account now waits on someone.
   */
  private dead(job: Job, why: string): void {
    const { id: jobId, kind, accountId, attempt } = job;
    const message = `job dead: ${why}; POST /admin/jobs/${jobId}/retry runs it again`;
    this.options.log?.error({ jobId, kind, accountId, attempts: attempt }, message);
  }

  /** Completions are coalesced: every job finishing while a delete runs joins the next one. */
  private async complete(lease: Lease): Promise<void> {
    this.pendingCompletions.push(lease);
    while (this.pendingCompletions.includes(lease)) {
      if (this.flushing !== undefined) {
        await this.flushing;
        continue;
      }
      const leases = this.pendingCompletions;
      this.pendingCompletions = [];
      this.flushing = completeJobs(this.options.database.db, leases).finally(() => {
        this.flushing = undefined;
      });
      await this.flushing;
    }
  }

  private async heartbeat(): Promise<void> {
    const leases = [...this.running.values()].map((run) => run.lease);
    if (leases.length === 0) return;
    await extendLeases(this.options.database.db, this.options.database.dialect, leases, this.options.leaseMs);
  }

  /**
   * Returns lapsed jobs to the queue, and marks dead, one transaction each with its kind's
   * onDead, those whose lease lapsed for the last time. Only kinds registered here: a job
   * of a kind this process does not know stays lapsed until a process that knows it
   * rescues it, since only that process knows what its death means for its domain row.
   */
  private async rescue(): Promise<void> {
    const { db, dialect } = this.options.database;
    const now = this.options.clock.now();
    await rescueExpiredLeases(db, dialect, now);
    for (const id of await lapsingToDeath(db, dialect, [...this.kinds.keys()])) {
      const died = await db.transaction().execute(async (trx) => {
        const row = await lapsedToDeath(trx, dialect, id, now);
        const onDead = row && this.kinds.get(row.kind)?.handler.onDead;
        if (onDead) await onDead(trx, jobOf(row), row.last_error!);
        return row;
      });
      if (died) this.dead(jobOf(died), `its lease lapsed ${MAX_LAPSES} times (it keeps killing or hanging its worker)`);
    }
  }

  private async guard(work: Promise<void>): Promise<void> {
    const guarded = work.catch((error: unknown) => this.options.log?.error({ err: error }, 'queue bookkeeping failed'));
    this.bookkeeping.add(guarded);
    try {
      await guarded;
    } finally {
      this.bookkeeping.delete(guarded);
    }
  }
}

function jobOf(row: JobRow): Job {
  return {
    id: row.id,
    kind: row.kind,
    payload: JSON.parse(row.payload),
    accountId: row.account_id,
    attempt: row.attempts,
    maxAttempts: row.max_attempts,
    idempotencyKey: row.idempotency_key,
  };
}

/**
 * Words for what a handler threw that is not an Error. String() itself throws on an object with
 * no prototype (or whose toString throws): the failure would then never be recorded, and the job
 * would wait for its lease to lapse, as if its worker had died.
 */
function messageOf(thrown: unknown): string {
  try {
    return String(thrown);
  } catch {
    return Object.prototype.toString.call(thrown);
  }
}
