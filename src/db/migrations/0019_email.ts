import { PostgresAdapter, type ColumnDefinitionBuilder, type Kysely } from 'kysely';

/**
 * Email (src/email): its campaigns, the sandbox's messages, and what an email's history holds
 * beyond a status word. Sends and recipients are the shared tables (0009).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  const serial = (c: ColumnDefinitionBuilder) =>
    postgres ? c.primaryKey().generatedByDefaultAsIdentity() : c.primaryKey();

  // Stored HTML an email batch names by emailCampaignId; names unique per account case-insensitively, as lists are.
  await db.schema
    .createTable('email_campaigns')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('name_key', 'text', (c) => c.notNull())
    .addColumn('html', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addUniqueConstraint('email_campaigns_name', ['account_id', 'name_key'])
    .execute();
  await db.schema
    .createIndex('email_campaigns_page')
    .on('email_campaigns')
    .columns(['account_id', 'created_at', 'id'])
    .execute();

  // What the sandbox transport took: each message as raw MIME (7-bit: nodemailer encodes
  // every part), the account's to read, newest first; purged with its send's bodies.
  await db.schema
    .createTable('sandbox_email')
    .addColumn('id', postgres ? 'bigint' : 'integer', serial)
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('send_id', 'text', (c) => c.notNull().references('sends.id').onDelete('cascade'))
    .addColumn('message_id', 'text', (c) => c.notNull())
    .addColumn('recipient', 'text', (c) => c.notNull())
    .addColumn('raw', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('sandbox_email_recipient')
    .on('sandbox_email')
    .columns(['account_id', 'recipient', 'id'])
    .execute();
  await db.schema.createIndex('sandbox_email_account').on('sandbox_email').columns(['account_id', 'id']).execute();
  await db.schema.createIndex('sandbox_email_send').on('sandbox_email').column('send_id').execute();

  // An email's events carry more than a word (ARCHITECTURE.md: history [{event, at, url?,
  // reply?}]): the URL of a Click, the SMTP reply of a Deferred or Bounce, and whether an Open
  // or Click looks like a machine's.
  await db.schema.alterTable('recipient_history').addColumn('url', 'text').execute();
  await db.schema.alterTable('recipient_history').addColumn('reply', 'text').execute();
  await db.schema.alterTable('recipient_history').addColumn('machine', 'boolean').execute();

  // Times a message was handed to its transport and refused for now (Deferred): it is tried
  // again, and given up (Bounce) after a few.
  await db.schema
    .alterTable('send_recipients')
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
}
