import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // Addresses an account must not send to on a channel (a STOP reply, a hard bounce, by
  // hand), whether or not a contact holds them: one table for SMS and email.
  await db.schema
    .createTable('suppressions')
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('channel', 'text', (c) => c.notNull())
    .addColumn('address', 'text', (c) => c.notNull())
    .addColumn('reason', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('suppressions_pkey', ['account_id', 'channel', 'address'])
    .execute();
}
