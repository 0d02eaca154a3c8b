import { sql, type Kysely } from 'kysely';

/**
 * A Deferred email waits for its own time to be tried again (email/record.ts, the backoff):
 * `retry_at`, set only while it is Deferred, and `deferred_at`, when it was first refused
 * for now, from which it is given up after 72 hours.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('send_recipients')
    .addColumn('retry_at', 'bigint', (c) => c.check(sql`retry_at is null or status = 'Deferred'`))
    .execute();
  await db.schema.alterTable('send_recipients').addColumn('deferred_at', 'bigint').execute();
  // The Deferred recipients of a send in the order they come due: a page of those due and the
  // earliest to wait for are read from the index alone, never by a walk over a 100,000-row
  // send. Partial, so it holds the few waiting rather than every recipient, and an update
  // that leaves retry_at null (every recipient's first answer) does not touch it.
  await db.schema
    .createIndex('send_recipients_retry')
    .on('send_recipients')
    .columns(['send_id', 'retry_at'])
    .where(sql.ref('retry_at'), 'is not', null)
    .execute();
}
