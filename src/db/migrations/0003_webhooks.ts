import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // One signing secret per account, created on first use. During a rotation the previous
  // secret keeps signing until previous_expires_at, so receivers can switch without a gap.
  await db.schema
    .createTable('webhook_secrets')
    .addColumn('account_id', 'text', (c) => c.primaryKey().references('accounts.id').onDelete('cascade'))
    .addColumn('secret', 'text', (c) => c.notNull())
    .addColumn('previous_secret', 'text')
    .addColumn('previous_expires_at', 'bigint')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('rotated_at', 'bigint')
    .execute();

  // The outbox: one row per event, written in the emitter's transaction with its delivery
  // job. `payload` is the exact body posted, so every attempt signs the same bytes.
  await db.schema
    .createTable('webhook_deliveries')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('payload', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('generation', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('last_status_code', 'integer')
    .addColumn('last_error', 'text')
    .addColumn('last_attempt_at', 'bigint')
    .addColumn('next_attempt_at', 'bigint')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('delivered_at', 'bigint')
    .addCheckConstraint('webhook_deliveries_status', sql`status in ('pending', 'delivered', 'failed')`)
    .execute();
  await db.schema
    .createIndex('webhook_deliveries_account_created')
    .on('webhook_deliveries')
    .columns(['account_id', 'created_at', 'id'])
    .execute();
}
