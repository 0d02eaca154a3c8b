import type { Kysely } from 'kysely';

/**
 * Each part keeps when it was submitted (epoch ms), so that a waiting receipt kept from before
 * then is not matched to it (src/sms/receipts.ts): an SMSC hands its ids out again, and a final
 * receipt it offers twice for an earlier message of the same number must not end a later one
 * that took the id. Null for parts recorded before this migration: any receipt matches them.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('sms_parts').addColumn('submitted_at', 'bigint').execute();
}
