import { procedure } from '../../../src/db/procedure.ts';
import { enqueue } from '../../../src/queue/queue.ts';

/** Queues a job from inside a procedure: on SQLite, from the database's own thread (test/queue/queue.test.ts). */
export const enqueuesJob = procedure(
  import.meta.url,
  'enqueuesJob',
  async ({ db }, args: { kind: string; payload: unknown; now: number }) =>
    db.transaction().execute((trx) => enqueue(trx, args)),
);
