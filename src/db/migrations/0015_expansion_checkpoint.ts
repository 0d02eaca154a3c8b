import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // A send's lists are expanded a range of addresses at a time, one short transaction each
  // (messaging/recipients.ts): the last address a committed range covered, where the next
  // starts, also after a crash.
  await db.schema.alterTable('sends').addColumn('expanded_through', 'text').execute();
}
