import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // A sandbox record of an isBodyEncrypted send keeps its text sealed (messaging/sealed.ts);
  // reads show it redacted rather than guess from the text which records are sealed.
  await db.schema
    .alterTable('sandbox_sms')
    .addColumn('sealed', 'boolean', (c) => c.notNull().defaultTo(false))
    .execute();
}
