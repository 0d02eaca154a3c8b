import { sql, type Kysely } from 'kysely';
import { procedure } from '../../../src/db/procedure.ts';
import type { Schema } from '../../../src/db/schema.ts';

/** Work that tells the order it ran in: test/db/priority.test.ts. */

/** Keeps the database busy a while: SQLite's thread counting, PostgreSQL's connection asleep. */
export const keepsTheDatabaseBusy = procedure(import.meta.url, 'keepsTheDatabaseBusy', async ({ db, dialect }) => {
  if (dialect === 'postgres') await sql`select pg_sleep(0.03)`.execute(db);
  else {
    const count = sql`with recursive n(i) as (select 1 union all select i + 1 from n where i < 1000000)
                      select count(*) from n`;
    await count.execute(db);
  }
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
