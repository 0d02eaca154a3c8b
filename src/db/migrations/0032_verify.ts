import { PostgresAdapter, sql, type ColumnDefinitionBuilder, type Kysely } from 'kysely';

/**
 * Verify (ARCHITECTURE.md, "Verify (one-time passcodes)"): each verification with its code's
 * keyed hash (never the code), the sends of codes (counted per number over 10 minutes), the
 * attempts the fraud guard blocked, and the counts of both rolled up before retention purges
 * them. The sandbox's copy of a code Herald made is opened by its account's read (`opens`).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  const serial = (c: ColumnDefinitionBuilder) =>
    postgres ? c.primaryKey().generatedByDefaultAsIdentity() : c.primaryKey();
  await db.schema
    .createTable('verifications')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('channel', 'text', (c) => c.notNull().check(sql`channel in ('sms', 'email')`))
    .addColumn('recipient', 'text', (c) => c.notNull())
    // ISO 3166 alpha-2 of an SMS number; '' for email and numbers of no single country.
    .addColumn('country', 'text', (c) => c.notNull())
    // The calling code and the national number's first 4 digits (the fraud guard's velocity key); '' for email.
    .addColumn('prefix', 'text', (c) => c.notNull())
    .addColumn('code_hash', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('attempts_left', 'integer', (c) => c.notNull())
    .addColumn('send_attempts', 'integer', (c) => c.notNull())
    .addColumn('last_sent_at', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .addColumn('webhook_url', 'text')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('ended_at', 'bigint')
    .execute();
  // The number's pending verification (a resend), newest first. With created_at in it, SQLite
  // takes this index for the lookup and its order: without, it sorted by verifications_created
  // and read every verification of the account, 4.9 ms a POST /verify at 19,452 (bench:verify).
  await db.schema
    .createIndex('verifications_recipient')
    .on('verifications')
    .columns(['account_id', 'recipient', 'status', 'created_at'])
    .execute();
  await db.schema
    .createIndex('verifications_prefix')
    .on('verifications')
    .columns(['account_id', 'prefix', 'created_at'])
    .execute();
  await db.schema
    .createIndex('verifications_created')
    .on('verifications')
    .columns(['account_id', 'created_at'])
    .execute();
  // The expiry sweep's pending ones by their end, and retention's by creation.
  await db.schema.createIndex('verifications_expiry').on('verifications').columns(['status', 'expires_at']).execute();
  await db.schema.createIndex('verifications_age').on('verifications').column('created_at').execute();

  await db.schema
    .createTable('verification_sends')
    .addColumn('id', postgres ? 'bigint' : 'integer', serial)
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('recipient', 'text', (c) => c.notNull())
    .addColumn('at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('verification_sends_recipient')
    .on('verification_sends')
    .columns(['account_id', 'recipient', 'at'])
    .execute();
  await db.schema.createIndex('verification_sends_at').on('verification_sends').column('at').execute();

  await db.schema
    .createTable('verify_blocked')
    .addColumn('id', postgres ? 'bigint' : 'integer', serial)
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('reason', 'text', (c) => c.notNull().check(sql`reason in ('country', 'prefix')`))
    .addColumn('country', 'text', (c) => c.notNull())
    .addColumn('at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('verify_blocked_account').on('verify_blocked').columns(['account_id', 'at']).execute();
  await db.schema.createIndex('verify_blocked_at').on('verify_blocked').column('at').execute();

  // Counts per account, quarter-hour bucket (messaging/rollup.ts's BUCKET_MS) and country.
  let rollup = db.schema
    .createTable('verify_rollup')
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('bucket', 'bigint', (c) => c.notNull())
    .addColumn('country', 'text', (c) => c.notNull())
    .addColumn('started', 'bigint', (c) => c.notNull())
    .addColumn('approved', 'bigint', (c) => c.notNull())
    .addColumn('failed', 'bigint', (c) => c.notNull())
    .addColumn('expired', 'bigint', (c) => c.notNull())
    .addColumn('blocked_country', 'bigint', (c) => c.notNull())
    .addColumn('blocked_prefix', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('verify_rollup_pkey', ['account_id', 'bucket', 'country']);
  if (!postgres) rollup = rollup.modifyEnd(sql`without rowid`);
  await rollup.execute();

  // The account's fraud guard (PATCH /account's `verify`), JSON; null for the defaults.
  await db.schema.alterTable('accounts').addColumn('verify', 'text').execute();
  for (const table of ['sandbox_sms', 'sandbox_email']) {
    await db.schema
      .alterTable(table)
      .addColumn('opens', 'boolean', (c) => c.notNull().defaultTo(false))
      .execute();
  }
}
