import type { Kysely } from 'kysely';
import { procedure } from '../../../src/db/procedure.ts';
import type { Schema } from '../../../src/db/schema.ts';
import { enqueue } from '../../../src/queue/queue.ts';

/** Work that tells the order it ran in: test/db/priority.test.ts. */

/**
 * Keeps SQLite's thread busy until told: it marks `hold[1]` once it runs, then blocks until
 * `hold[0]` is set (a SharedArrayBuffer: the thread cannot take a message while it blocks).
 */
export const blocksTheThread = procedure(import.meta.url, 'blocksTheThread', async (_database, hold: Int32Array) => {
  Atomics.store(hold, 1, 1);
  Atomics.wait(hold, 0, 0);
});

/** One statement that leaves a mark of its run: a job named `label`, its id the order it ran in. */
export const markRun = (db: Kysely<Schema>, label: string) =>
  enqueue(db, { kind: label, payload: {}, now: 0, idempotencyKey: label });

export const marksItsRun = procedure(import.meta.url, 'marksItsRun', ({ db }, label: string) => markRun(db, label));
