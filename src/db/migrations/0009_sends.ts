import { PostgresAdapter, sql, type ColumnDefinitionBuilder, type Kysely } from 'kysely';

/**
 * Sends (an SMS request, an email batch) and their recipients: one table each for both
 * channels (src/messaging), so expansion, status words, history and reads are one piece.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  // SQLite's INTEGER PRIMARY KEY is the rowid; PostgreSQL numbers rows by identity.
  const serial = (c: ColumnDefinitionBuilder) =>
    postgres ? c.primaryKey().generatedByDefaultAsIdentity() : c.primaryKey();
  const rowId = postgres ? 'bigint' : 'integer';

  // content: the channel's request as accepted (JSON), read once per send by its worker.
  // cursor: the last recipient id handled, saved with each page's results, so a worker that
  // dies resumes after the last recorded page.
  await db.schema
    .createTable('sends')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('channel', 'text', (c) => c.notNull().check(sql`channel in ('sms', 'email')`))
    .addColumn('status', 'text', (c) =>
      c.notNull().check(sql`status in ('Queued', 'Scheduled', 'Cancelled', 'Sending', 'Completed')`),
    )
    .addColumn('content', 'text', (c) => c.notNull())
    .addColumn('list_ids', 'text', (c) => c.notNull())
    .addColumn('webhook_url', 'text')
    .addColumn('scheduled_at', 'bigint')
    .addColumn('expanded', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('cursor', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('started_at', 'bigint')
    .addColumn('completed_at', 'bigint')
    .execute();

  // One row per address of a send (the key (send_id, address) makes a re-run of an
  // expansion add nothing twice). tags: the request's own substitution tags for it (JSON);
  // contact_id: the contact whose properties fill the other tags.
  await db.schema
    .createTable('send_recipients')
    .addColumn('id', rowId, serial)
    .addColumn('send_id', 'text', (c) => c.notNull().references('sends.id').onDelete('cascade'))
    .addColumn('address', 'text', (c) => c.notNull())
    .addColumn('contact_id', 'bigint')
    .addColumn('tags', 'text')
    .addColumn('status', 'text', (c) =>
      c.notNull().check(
        sql`status in ('Queued', 'Cancelled', 'Submitted', 'Processed', 'Delivered', 'Failed', 'NotSent', 'Dropped',
                         'Deferred', 'Bounce')`,
      ),
    )
    .addColumn('reason', 'text')
    .addColumn('message_id', 'text')
    .addColumn('parts', 'integer')
    .addColumn('encoding', 'text')
    .addColumn('error', 'text')
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .addUniqueConstraint('send_recipients_address', ['send_id', 'address'])
    .execute();
  // Pages in id order; on SQLite the rowid is in every index, so (send_id) is (send_id, id).
  await db.schema
    .createIndex('send_recipients_page')
    .on('send_recipients')
    .columns(postgres ? ['send_id', 'id'] : ['send_id'])
    .execute();

  // Every status a recipient reached after Queued (which is the send's createdAt).
  await db.schema
    .createTable('recipient_history')
    .addColumn('recipient_id', 'bigint', (c) => c.notNull().references('send_recipients.id').onDelete('cascade'))
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('recipient_history_recipient').on('recipient_history').column('recipient_id').execute();

  // An SMS's parts as the operator took them: its id for each, which receipts name.
  await db.schema
    .createTable('sms_parts')
    .addColumn('recipient_id', 'bigint', (c) => c.notNull().references('send_recipients.id').onDelete('cascade'))
    .addColumn('part', 'integer', (c) => c.notNull())
    .addColumn('operator_message_id', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('sms_parts_pkey', ['recipient_id', 'part'])
    .execute();

  // What the sandbox transport took: each part as text, the account's to read.
  await db.schema
    .createTable('sandbox_sms')
    .addColumn('id', rowId, serial)
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('send_id', 'text', (c) => c.notNull().references('sends.id').onDelete('cascade'))
    .addColumn('message_id', 'text', (c) => c.notNull())
    .addColumn('recipient', 'text', (c) => c.notNull())
    .addColumn('sender', 'text', (c) => c.notNull())
    .addColumn('part', 'integer', (c) => c.notNull())
    .addColumn('parts', 'integer', (c) => c.notNull())
    .addColumn('encoding', 'text', (c) => c.notNull())
    .addColumn('text', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('sandbox_sms_recipient')
    .on('sandbox_sms')
    .columns(['account_id', 'recipient', 'id'])
    .execute();
}
