import { sql, type Kysely } from 'kysely';

/**
 * What the retention sweep (src/messaging/retention.ts) needs to find its work without
 * scanning what it has done or must keep. Each index is partial: it holds only rows the sweep
 * may still take, so it stays the size of RETENTION_DAYS' worth of them, not of the table.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  // When a send's bodies, tags and sandbox records were purged; null until then.
  await db.schema.alterTable('sends').addColumn('purged_at', 'bigint').execute();
  // Finished sends not yet purged, oldest first: the sweep's next sends, whatever it purged before.
  await db.schema
    .createIndex('sends_purgeable')
    .on('sends')
    .column('completed_at')
    .where(sql.ref('purged_at'), 'is', null)
    .where(sql.ref('completed_at'), 'is not', null)
    .execute();
  // The sandbox's records of a send, deleted by send.
  await db.schema.createIndex('sandbox_sms_send').on('sandbox_sms').column('send_id').execute();
  // A send's recipients that carry tags of their own (at most the 1,000 of its request): the
  // send's list-expanded recipients, however many, are not read to find them.
  await db.schema
    .createIndex('send_recipients_tagged')
    .on('send_recipients')
    .column('send_id')
    .where(sql.ref('tags'), 'is not', null)
    .execute();
  // Dead jobs by when they gave up; finished jobs are deleted, so these are few.
  await db.schema
    .createIndex('jobs_dead')
    .on('jobs')
    .column('finished_at')
    .where(sql.ref('state'), '=', 'dead')
    .execute();
  // Deliveries that are no longer pending (delivered or given up), by age.
  await db.schema
    .createIndex('webhook_deliveries_settled')
    .on('webhook_deliveries')
    .column('created_at')
    .where(sql.ref('status'), '<>', 'pending')
    .execute();
}
