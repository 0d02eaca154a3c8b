import { PostgresAdapter, sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // The work queue (ARCHITECTURE.md, "Processes and scale"): the database is the queue.
  // A finished job is deleted; a job that used up its attempts stays as `dead` for inspection.
  // SQLite's INTEGER PRIMARY KEY is the rowid: the cheapest key it has.
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  await db.schema
    .createTable('jobs')
    .addColumn('id', postgres ? 'bigint' : 'integer', (c) =>
      postgres ? c.primaryKey().generatedByDefaultAsIdentity() : c.primaryKey(),
    )
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('account_id', 'text', (c) => c.references('accounts.id').onDelete('cascade'))
    .addColumn('payload', 'text', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('max_attempts', 'integer', (c) => c.notNull())
    .addColumn('run_at', 'bigint', (c) => c.notNull())
    .addColumn('leased_by', 'text')
    .addColumn('lease_expires_at', 'bigint')
    .addColumn('idempotency_key', 'text', (c) => c.notNull().unique())
    .addColumn('last_error', 'text')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('finished_at', 'bigint')
    .addCheckConstraint('jobs_state', sql`state in ('ready', 'running', 'dead')`)
    .addCheckConstraint('jobs_lease', sql`(state = 'running') = (lease_expires_at is not null)`)
    .execute();
  // Partial indexes keep the claim's and the rescuer's scans to the rows they can take,
  // however many dead jobs pile up.
  await db.schema
    .createIndex('jobs_ready')
    .on('jobs')
    .columns(['kind', 'run_at', 'id'])
    .where(sql.ref('state'), '=', 'ready')
    .execute();
  await db.schema
    .createIndex('jobs_running')
    .on('jobs')
    .column('lease_expires_at')
    .where(sql.ref('state'), '=', 'running')
    .execute();
}
