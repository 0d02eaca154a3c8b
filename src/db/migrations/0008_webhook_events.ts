import { PostgresAdapter, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // Status events waiting to be gathered into a webhook post (src/webhooks/events.ts): one
  // row per event, appended in the transaction that changed the status, deleted in the one
  // that writes the delivery taking it. `payload` is the event's JSON, posted as it is.
  // SQLite's INTEGER PRIMARY KEY is the rowid: the cheapest key it has, and append order.
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  await db.schema
    .createTable('webhook_events')
    .addColumn('id', postgres ? 'bigint' : 'integer', (c) => (postgres ? c.primaryKey().generatedByDefaultAsIdentity() : c.primaryKey()))
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('payload', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  // A gather takes one stream's oldest events first.
  await db.schema
    .createIndex('webhook_events_stream')
    .on('webhook_events')
    .columns(['account_id', 'type', 'url', 'id'])
    .execute();
}
