import type { Kysely } from 'kysely';
import { procedure } from '../../../src/db/procedure.ts';
import type { Schema } from '../../../src/db/schema.ts';

/** Work that tells the order it ran in: test/db/priority.test.ts. */

/**
 * Keeps SQLite's thread busy until told: it marks `hold[1]` once it runs, then blocks until
 * `hold[0]` is set (a SharedArrayBuffer: the thread cannot take a message while it blocks).
 */
export const blocksTheThread = procedure(import.meta.url, 'blocksTheThread', async (_database, hold: Int32Array) => {
  Atomics.store(hold, 1, 1);
  Atomics.wait(hold, 0, 0);
});

/** One statement that leaves a mark of its run: a job row named `label`, its id the order it ran in. */
export async function markRun(db: Kysely<Schema>, label: string): Promise<void> {
  await db
    .insertInto('jobs')
    .values({
      kind: label,
      account_id: null,
      payload: '{}',
      state: 'ready',
      max_attempts: 1,
      run_at: 0,
      leased_by: null,
      lease_token: null,
      lease_expires_at: null,
      priority: 0,
      idempotency_key: label,
      last_error: null,
      created_at: 0,
      finished_at: null,
    })
    .execute();
}

export const marksItsRun = procedure(import.meta.url, 'marksItsRun', ({ db }, label: string) => markRun(db, label));
