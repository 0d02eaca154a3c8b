import type { Kysely } from 'kysely';

/**
 * `GET /sandbox/sms` without a recipient reads an account's parts newest first. The only index
 * that led with the account also held the recipient, so that read walked every account's parts
 * by id until it found a page of its own.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.createIndex('sandbox_sms_account').on('sandbox_sms').columns(['account_id', 'id']).execute();
}
