import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // priority: the lane, claimed lowest first within a kind (queue.ts, PRIORITY; 2 is its ordinary lane).
  // lapses: leases that lapsed (the worker died or hung); counted apart from attempts, which
  // only a handler's own failure spends. lease_token: fresh per claim, so only the claim
  // that holds a job can complete, fail or extend it.
  await db.schema
    .alterTable('jobs')
    .addColumn('priority', 'integer', (c) => c.notNull().defaultTo(2))
    .execute();
  await db.schema
    .alterTable('jobs')
    .addColumn('lapses', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema.alterTable('jobs').addColumn('lease_token', 'text').execute();
  await db.schema.dropIndex('jobs_ready').execute();
  await db.schema
    .createIndex('jobs_ready')
    .on('jobs')
    .columns(['kind', 'priority', 'run_at', 'id'])
    .where(sql.ref('state'), '=', 'ready')
    .execute();
}
