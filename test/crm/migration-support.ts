import assert from 'node:assert/strict';
import { type Kysely, Migrator, sql } from 'kysely';
import { createAccount } from '../../src/accounts/service.ts';
import { ManualClock } from '../../src/clock.ts';
import { migrations } from '../../src/db/migrations/index.ts';
import type { Schema } from '../../src/db/schema.ts';

/**
 * A database of the CRM's migration tests, migrated up to `before`, with an account and a list
 * of its: `migrateTo` then runs the migrations up to the one a test is about.
 */
export async function listBefore(db: Kysely<Schema>, before: string) {
  const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations } });
  const migrateTo = async (name: string) => assert.ifError((await migrator.migrateTo(name)).error);
  await migrateTo(before);
  const account = await createAccount(db, new ManualClock(), {
    userName: 'alice@example.com',
    password: 'a long enough password',
  });
  const listId = '11111111-0000-4000-8000-000000000001';
  await sql`insert into contact_lists (id, account_id, name, name_key, is_default, created_at)
            values (${listId}, ${account.id}, 'Spring', 'spring', ${sql.lit(false)}, 0)`.execute(db);
  return { accountId: account.id, listId, migrateTo };
}
