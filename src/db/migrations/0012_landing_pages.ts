import { PostgresAdapter, type ColumnDefinitionBuilder, type Kysely } from 'kysely';

/**
 * Landing pages, the hosts that shorten links to them, and short links with their clicks
 * (src/links). Links are channel-neutral: a link names its account, its send, the recipient
 * it was made for (none when the send shares one link) and the URL it leads to, so email's
 * click tracking uses the same tables.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  const serial = (c: ColumnDefinitionBuilder) =>
    postgres ? c.primaryKey().generatedByDefaultAsIdentity() : c.primaryKey();

  // Names unique per account case-insensitively (name_key), as lists are.
  await db.schema
    .createTable('landing_pages')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('name_key', 'text', (c) => c.notNull())
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addUniqueConstraint('landing_pages_name', ['account_id', 'name_key'])
    .execute();
  await db.schema
    .createIndex('landing_pages_page')
    .on('landing_pages')
    .columns(['account_id', 'created_at', 'id'])
    .execute();

  // A host answers for one account only: the domain is the key, not (account, domain).
  await db.schema
    .createTable('shortener_domains')
    .addColumn('domain', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('shortener_domains_account')
    .on('shortener_domains')
    .columns(['account_id', 'domain'])
    .execute();

  await db.schema
    .createTable('links')
    .addColumn('code', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('send_id', 'text', (c) => c.notNull().references('sends.id').onDelete('cascade'))
    .addColumn('recipient_id', 'bigint', (c) => c.references('send_recipients.id').onDelete('cascade'))
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('links_send').on('links').column('send_id').execute();
  await db.schema.createIndex('links_recipient').on('links').column('recipient_id').execute();

  await db.schema
    .createTable('link_clicks')
    .addColumn('id', postgres ? 'bigint' : 'integer', serial)
    .addColumn('code', 'text', (c) => c.notNull().references('links.code').onDelete('cascade'))
    .addColumn('at', 'bigint', (c) => c.notNull())
    .addColumn('user_agent', 'text')
    .execute();
  await db.schema.createIndex('link_clicks_code').on('link_clicks').columns(['code', 'id']).execute();
}
