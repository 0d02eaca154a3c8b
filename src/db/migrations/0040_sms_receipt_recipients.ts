import type { Kysely } from 'kysely';

/**
 * A waiting receipt keeps the number it reports on (SMPP's source address), so that it matches
 * a part of that number only (src/sms/receipts.ts): an SMSC hands its ids out again, and a
 * receipt for one number's message must not end another's that took the same id. Null for a
 * receipt whose transport names no number.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('sms_receipts').addColumn('recipient', 'text').execute();
}
