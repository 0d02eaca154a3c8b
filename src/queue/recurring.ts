import type { Kysely } from 'kysely';
import type { Clock } from '../clock.ts';
import type { Schema } from '../db/schema.ts';
import { reviveJob } from './queries.ts';
import { enqueue } from './queue.ts';
import { SnoozeJob, type JobHandler } from './worker.ts';

/**
 * Work done again and again at an interval, by one process at a time however many run: a
 * standing job of the durable queue rather than a timer in each process. Its kind is its
 * idempotency key, so the job exists once; each worker that registers the kind queues it when
 * it starts (adding nothing when it is there), and after each run the handler snoozes it to
 * its next time, which spends no attempt. So it survives restarts and crashes (its row stays,
 * and a lapsed lease returns it to the queue like any job), and runs once per interval.
 */
export interface RecurringTask {
  /** The job's kind, and its idempotency key. */
  kind: string;
  /** From the end of one run to the start of the next. */
  everyMs: number;
  /** The work. It stops early, between steps, once `signal` aborts (its worker is stopping). */
  run(signal: AbortSignal): Promise<void>;
}

/**
 * The task's job handler. A failing run is retried with the queue's backoff like any job, and
 * after its attempts it is dead, shown with its error in `GET /admin/jobs`; the next worker
 * that starts revives it, since a recurring job must not stay gone. A run stopped early by its
 * worker's stop is taken up again at once by another worker, or at the next start.
 */
export function recurringHandler(clock: Clock, task: RecurringTask): JobHandler {
  return {
    onStart: (db, now) => scheduleRecurring(db, task.kind, now),
    async handle(_job, run) {
      await task.run(run.signal);
      if (run.signal.aborted)
        throw new SnoozeJob(clock.now(), 'recurring: cut short by its worker’s stop, runs again at once');
      throw new SnoozeJob(clock.now() + task.everyMs, 'recurring: waits for its next run');
    },
  };
}

/** Queues the recurring job of `kind` to run now, unless it is queued already; a dead one runs again. */
export async function scheduleRecurring(db: Kysely<Schema>, kind: string, now: number): Promise<void> {
  await enqueue(db, { kind, payload: null, now, idempotencyKey: kind });
  await reviveJob(db, { idempotencyKey: kind }, now);
}
