import { PostgresAdapter, sql, type Kysely } from 'kysely';

/**
 * PostgreSQL: the rows written for every message lose their foreign keys. Each key is checked
 * row by row, and a check locks the row it finds (FOR KEY SHARE): a batch page of 500
 * messages checked its 1,000 history rows and 500 parts against their recipients, and its
 * 500 sandbox copies against their send and their account (rows every other transaction
 * locked too), which took about 35 ms of the page's 50 (auto_explain's log_triggers); the
 * expansion's check, 13 µs a recipient. Without them the SMS
 * bench's batch went from 4,712 to 9,096 messages/s. Their writers are the send's own
 * transactions, which find the send first; the one thing the keys did beyond that, their
 * cascade when an account is deleted, is accounts/service.ts's deleteAccount now. SQLite keeps
 * its keys: there a check is an index probe in the same process, and dropping one would
 * rewrite the table.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  if (!(db.getExecutor().adapter instanceof PostgresAdapter)) return;
  for (const [table, constraint] of [
    ['send_recipients', 'send_recipients_send_id_fkey'],
    ['recipient_history', 'recipient_history_recipient_id_fkey'],
    ['sms_parts', 'sms_parts_recipient_id_fkey'],
    ['sandbox_sms', 'sandbox_sms_account_id_fkey'],
    ['sandbox_sms', 'sandbox_sms_send_id_fkey'],
    ['sandbox_email', 'sandbox_email_account_id_fkey'],
    ['sandbox_email', 'sandbox_email_send_id_fkey'],
  ]) {
    await sql`alter table ${sql.table(table)} drop constraint ${sql.ref(constraint)}`.execute(db);
  }
}
