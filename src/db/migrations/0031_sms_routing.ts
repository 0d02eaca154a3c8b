import type { Kysely } from 'kysely';

/**
 * SMS routes (ARCHITECTURE.md, "SMS routes (operator)"): the SMSC connections added through the
 * admin API beside SMS_TRANSPORT's `default`, the routing table, the binds each worker process
 * holds per connection, and the connection that took each part.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('smsc_connections')
    .addColumn('name', 'text', (c) => c.primaryKey())
    // The URL as it is shown, its password replaced by ***; the whole of it sealed beside.
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('sealed_url', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  // The table as PUT gave it: `position` keeps its order, which the GET answers in.
  await db.schema
    .createTable('sms_routes')
    .addColumn('position', 'integer', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.references('accounts.id').onDelete('cascade'))
    .addColumn('prefix', 'text', (c) => c.notNull())
    // JSON list of connection names, in the order a part tries them.
    .addColumn('smsc', 'text', (c) => c.notNull())
    .addColumn('price_micros', 'bigint')
    .addColumn('currency', 'text')
    .execute();
  // Each worker process's binds up per connection, written every few seconds while it runs.
  await db.schema
    .createTable('smsc_binds')
    .addColumn('process', 'text', (c) => c.notNull())
    .addColumn('smsc', 'text', (c) => c.notNull())
    .addColumn('binds', 'integer', (c) => c.notNull())
    .addColumn('seen_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('smsc_binds_pkey', ['process', 'smsc'])
    .execute();
  // Every part sent before took SMS_TRANSPORT's connection.
  await db.schema
    .alterTable('sms_parts')
    .addColumn('smsc', 'text', (c) => c.notNull().defaultTo('default'))
    .execute();
}
