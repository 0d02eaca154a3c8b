import type { Kysely } from 'kysely';

/**
 * Whether a recipient's tracking and mailbox tokens sign its send (email/tracking-tokens.ts):
 * true for every row written from now on. A row written before (false, as is every row this
 * adds the column to, without rewriting one) still takes tokens of the earlier form, which sign
 * the row id alone; on SQLite, which gives a deleted row's id again, a row written since takes
 * none, so an old message's token never acts on a recipient that took its id.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('send_recipients')
    .addColumn('bound_tokens', 'boolean', (c) => c.notNull().defaultTo(false))
    .execute();
}
