import { sql, type Kysely } from 'kysely';

/**
 * A send's SMS recipients an SMSC refused for now, Queued with their first refusal's time, whose
 * suppression and consent are decided again before each new try (messaging/recipients.ts,
 * releaseDueRecipients). Partial, as send_recipients_retry is (0021): a send's start finds its
 * few with a seek, and a recipient never refused costs it nothing.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createIndex('send_recipients_tried_again')
    .on('send_recipients')
    .column('send_id')
    .where(sql<boolean>`status = 'Queued' and deferred_at is not null`)
    .execute();
}
