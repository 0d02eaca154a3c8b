import { sql, type Kysely } from 'kysely';

/**
 * A message found by its Message-ID (`<uuid@domain>`, send_recipients.message_id the uuid):
 * what an ARF feedback report names when the original's return path did not survive the
 * feedback loop, and what a DSN sent to the feedback mailbox names. Partial: a recipient not yet
 * handed over has none, and most rows of a send in progress are such.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createIndex('send_recipients_message_id')
    .on('send_recipients')
    .column('message_id')
    .where(sql.ref('message_id'), 'is not', null)
    .execute();
}
