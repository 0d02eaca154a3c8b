import type { Kysely } from 'kysely';

/**
 * An SMS recipient's error code: the operator's (a receipt's `err:`, an SMPP command_status)
 * that its Failed webhook event carries, kept for `GET /sms/{queueId}` after the receipt that
 * brought it is gone (receipts are deleted once matched, and purged unmatched).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('send_recipients').addColumn('error_code', 'text').execute();
}
