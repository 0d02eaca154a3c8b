import { PostgresAdapter, type ColumnDefinitionBuilder, type Kysely } from 'kysely';

/**
 * What a transaction that changes statuses counts, appended (src/messaging/rollup.ts): an
 * insert, where an upsert into usage_rollup locked the account's row of that quarter-hour and
 * status until commit, so on PostgreSQL every page, passcode and receipt of an account queued
 * behind the one before it (an SMS batch fell from 1,739 to 668 messages/s). A recurring job
 * folds the rows into usage_rollup, one fold at a time; the reads add what is not yet folded.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  const serial = (c: ColumnDefinitionBuilder) =>
    postgres ? c.primaryKey().generatedByDefaultAsIdentity() : c.primaryKey();
  await db.schema
    .createTable('usage_deltas')
    .addColumn('id', postgres ? 'bigint' : 'integer', serial)
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('channel', 'text', (c) => c.notNull())
    .addColumn('bucket', 'bigint', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('encoding', 'text', (c) => c.notNull())
    .addColumn('messages', 'bigint', (c) => c.notNull())
    .addColumn('parts', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('usage_deltas_account')
    .on('usage_deltas')
    .columns(['account_id', 'channel', 'bucket'])
    .execute();
}
