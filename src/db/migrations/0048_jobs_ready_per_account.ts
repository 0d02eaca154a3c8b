import { sql, type Kysely } from 'kysely';

/**
 * Webhook posts are claimed per account (queue/queries.ts, claimPerAccount): the claim walks the
 * accounts with posts queued, and takes each one's first due posts, one probe of this index each.
 * Partial to the kind, so other kinds' jobs, by the thousand a second, do not write it; a kind
 * claimed per account needs an index of its own like this one.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createIndex('jobs_ready_webhook_deliver_by_account')
    .on('jobs')
    .columns(['account_id', 'priority', 'run_at', 'id'])
    .where(sql<boolean>`state = 'ready' and kind = 'webhook.deliver'`)
    .execute();
}
