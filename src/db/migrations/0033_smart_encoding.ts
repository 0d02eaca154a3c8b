import { sql, type Kysely } from 'kysely';

/**
 * Smart encoding (ARCHITECTURE.md, "Preflight"): an account's switch, on for the accounts made
 * from now on (the column's default) and off for those there are, whose texts and bills do not
 * change on upgrade; and how many characters it replaced in each recipient's message.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('accounts')
    .addColumn('smart_encoding', 'boolean', (c) => c.notNull().defaultTo(true))
    .execute();
  await sql`update accounts set smart_encoding = false`.execute(db);
  await db.schema.alterTable('send_recipients').addColumn('replaced_characters', 'integer').execute();
}
