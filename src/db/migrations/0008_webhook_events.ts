import { PostgresAdapter, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // Status events waiting to be gathered into webhook posts (src/webhooks/events.ts): one
  // row per append (a JSON array of its events), written in the transaction that changed the
  // statuses, deleted (or cut down to what is left) in the one that writes the deliveries
  // taking them. SQLite's INTEGER PRIMARY KEY is the rowid: the cheapest key it has.
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  await db.schema
    .createTable('webhook_events')
    .addColumn('id', postgres ? 'bigint' : 'integer', (c) =>
      postgres ? c.primaryKey().generatedByDefaultAsIdentity() : c.primaryKey(),
    )
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('events', 'text', (c) => c.notNull())
    .addColumn('event_count', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  // A gather takes one stream's oldest events first.
  await db.schema
    .createIndex('webhook_events_stream')
    .on('webhook_events')
    .columns(['account_id', 'type', 'url', 'id'])
    .execute();
}
