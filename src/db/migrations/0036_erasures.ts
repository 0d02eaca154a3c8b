import { sql, type Kysely } from 'kysely';

/**
 * Erasure (ARCHITECTURE.md, "Data rights and management"): each erasure as the record of who
 * asked, when, for what (the identifiers as keyed hashes) and how much went, with the
 * identifiers themselves sealed only while its job runs; and the suppressions of erased people,
 * kept as the keyed hash of their number or address (privacy/erasures.ts), which the consent
 * checks of every send match.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('erasures')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('status', 'text', (c) => c.notNull().check(sql`status in ('Processing', 'Completed', 'Failed')`))
    .addColumn('requested_by', 'text', (c) => c.notNull())
    // JSON array of the person's identifiers as keyed hashes: what was erased, never who.
    .addColumn('hashes', 'text', (c) => c.notNull())
    // The identifiers in clear, sealed under ENCRYPTION_KEY, until the job is done.
    .addColumn('sealed_identifiers', 'text')
    .addColumn('contacts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('messages', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('completed_at', 'bigint')
    .execute();
  await db.schema.createIndex('erasures_account').on('erasures').columns(['account_id', 'created_at']).execute();

  await db.schema
    .createTable('erased_suppressions')
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('channel', 'text', (c) => c.notNull().check(sql`channel in ('sms', 'email')`))
    .addColumn('hash', 'text', (c) => c.notNull())
    .addColumn('reason', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('erased_suppressions_pkey', ['account_id', 'channel', 'hash'])
    .execute();
}
