import { sql, type Kysely } from 'kysely';

/**
 * An account's contact batches apply in the order they were accepted, also when one's job was
 * set back (its worker died, or an attempt failed): a batch waits while an older one of its
 * account is queued (crm/apply.ts). That check reads the account's queued batches: a partial
 * index, as small as the queue.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createIndex('contact_batches_queued_account')
    .on('contact_batches')
    .columns(['account_id', 'created_at'])
    .where(sql.ref('status'), '=', 'Queued')
    .execute();
}
