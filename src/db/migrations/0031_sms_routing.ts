import { PostgresAdapter, sql, type Kysely } from 'kysely';

/**
 * SMS routes (ARCHITECTURE.md, "SMS routes (operator)"): the SMSC connections added through the
 * admin API beside SMS_TRANSPORT's `default`, the routing table, the binds each worker process
 * holds per connection, and the connection that took each part (answered, and recorded).
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
  // Two SMSCs may hand out the same id: a receipt waiting for its part is kept under its
  // connection's name with it. Rebuilt, as SQLite changes no primary key in place.
  await db.schema
    .createTable('sms_receipts_by_smsc')
    .addColumn('smsc', 'text', (c) => c.notNull())
    .addColumn('operator_message_id', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('error_code', 'text')
    .addColumn('at', 'bigint', (c) => c.notNull())
    // The id first: receipts are looked up by their ids (receipts.ts), then matched within their connection.
    .addPrimaryKeyConstraint('sms_receipts_by_smsc_pkey', ['operator_message_id', 'smsc'])
    .execute();
  await sql`insert into sms_receipts_by_smsc (smsc, operator_message_id, status, error_code, at)
            select 'default', operator_message_id, status, error_code, at from sms_receipts`.execute(db);
  await db.schema.dropTable('sms_receipts').execute();
  await db.schema.alterTable('sms_receipts_by_smsc').renameTo('sms_receipts').execute();
  // A message's connection and price (parts × the route's price per part) at its submit.
  await db.schema.alterTable('send_recipients').addColumn('smsc', 'text').execute();
  await db.schema.alterTable('send_recipients').addColumn('price_micros', 'bigint').execute();
  await db.schema.alterTable('send_recipients').addColumn('currency', 'text').execute();
  await usageWithCost(db);
  // Every part sent before took SMS_TRANSPORT's connection.
  for (const table of ['sms_parts', 'smpp_submits']) {
    await db.schema
      .alterTable(table)
      .addColumn('smsc', 'text', (c) => c.notNull().defaultTo('default'))
      .execute();
  }
}

/**
 * Usage counts the cost of what was Submitted, per currency ('' for none): a key column of the
 * rollup (rebuilt, as SQLite changes no primary key in place) and of its deltas.
 */
async function usageWithCost(db: Kysely<unknown>): Promise<void> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  let table = db.schema
    .createTable('usage_rollup_by_currency')
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('channel', 'text', (c) => c.notNull().check(sql`channel in ('sms', 'email')`))
    .addColumn('bucket', 'bigint', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('encoding', 'text', (c) => c.notNull())
    .addColumn('currency', 'text', (c) => c.notNull())
    .addColumn('messages', 'bigint', (c) => c.notNull())
    .addColumn('parts', 'bigint', (c) => c.notNull())
    .addColumn('cost_micros', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('usage_rollup_by_currency_pkey', [
      'account_id',
      'channel',
      'bucket',
      'status',
      'encoding',
      'currency',
    ]);
  if (!postgres) table = table.modifyEnd(sql`without rowid`);
  await table.execute();
  await sql`insert into usage_rollup_by_currency
              (account_id, channel, bucket, status, encoding, currency, messages, parts, cost_micros)
            select account_id, channel, bucket, status, encoding, '', messages, parts, 0
              from usage_rollup`.execute(db);
  await db.schema.dropTable('usage_rollup').execute();
  await db.schema.alterTable('usage_rollup_by_currency').renameTo('usage_rollup').execute();
  await db.schema
    .alterTable('usage_deltas')
    .addColumn('currency', 'text', (c) => c.notNull().defaultTo(''))
    .execute();
  await db.schema
    .alterTable('usage_deltas')
    .addColumn('cost_micros', 'bigint', (c) => c.notNull().defaultTo(0))
    .execute();
}
