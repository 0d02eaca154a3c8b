import { PostgresAdapter, sql, type ColumnDefinitionBuilder, type Kysely } from 'kysely';

/** Messages from handsets (MO) and what routes them to an account (src/sms/inbound.ts). */
export async function up(db: Kysely<unknown>): Promise<void> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  const serial = (c: ColumnDefinitionBuilder) =>
    postgres ? c.primaryKey().generatedByDefaultAsIdentity() : c.primaryKey();

  // Where the account's MO messages are posted (`sms.inbound`); null: they are only stored.
  await db.schema.alterTable('accounts').addColumn('inbound_sms_webhook_url', 'text').execute();

  // sender: the handset's number; destination: the number (or name) it wrote to.
  // contact_id: the account's most recently updated contact with the sender's number.
  await db.schema
    .createTable('sms_inbound')
    .addColumn('id', postgres ? 'bigint' : 'integer', serial)
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('sender', 'text', (c) => c.notNull())
    .addColumn('destination', 'text', (c) => c.notNull())
    .addColumn('text', 'text', (c) => c.notNull())
    .addColumn('contact_id', 'bigint')
    .addColumn('received_at', 'bigint', (c) => c.notNull())
    .execute();
  // An account's MO messages, newest first, or one number's.
  await db.schema.createIndex('sms_inbound_account').on('sms_inbound').columns(['account_id', 'received_at']).execute();
  await db.schema
    .createIndex('sms_inbound_sender')
    .on('sms_inbound')
    .columns(['account_id', 'sender', 'received_at'])
    .execute();

  // A numeric sender name (a long or short code) routes replies to its account, so one account
  // at most holds it; alphanumeric names cannot be replied to and stay shareable.
  const numeric = postgres ? sql`name ~ '^[0-9]+$'` : sql`name not glob '*[^0-9]*'`;
  await sql`create unique index sender_names_numeric on sender_names (name) where ${numeric}`.execute(db);

  // Replies to a name or number that is not an account's own go to the account that last sent
  // to the handset from it: the handset's recipients, newest first (on SQLite the rowid, the
  // id, ends every index).
  await db.schema
    .createIndex('send_recipients_handset')
    .on('send_recipients')
    .columns(postgres ? ['address', 'id'] : ['address'])
    .execute();
}
