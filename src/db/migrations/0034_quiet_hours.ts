import { sql, type Kysely } from 'kysely';

/**
 * Quiet hours (ARCHITECTURE.md, "Preflight"): an account's window, JSON `{start, end}` or null
 * (off, every account's default); and a held SMS recipient's `due_at`, the window's end in
 * its zone (epoch ms), set only while it waits Queued for it (messaging/holds.ts).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('accounts').addColumn('quiet_hours', 'text').execute();
  await db.schema.alterTable('send_recipients').addColumn('due_at', 'bigint').execute();
  // A send's held recipients in the order they come due: the earliest to wake the send for,
  // those due, and a read's count of them, from the index alone. Partial, as
  // send_recipients_retry is (0021): it holds only the few waiting, and a recipient never
  // held (every one of an account without quiet hours) costs it nothing.
  await db.schema
    .createIndex('send_recipients_due')
    .on('send_recipients')
    .columns(['send_id', 'due_at'])
    .where(sql.ref('due_at'), 'is not', null)
    .execute();
}
