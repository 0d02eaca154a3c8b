import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { Migrator, sql } from 'kysely';
import { createAccount } from '../../src/accounts/service.ts';
import { ManualClock } from '../../src/clock.ts';
import { NEXT_ACCEPT_ORDER } from '../../src/crm/queries.ts';
import { migrations } from '../../src/db/migrations/index.ts';
import { createTestDatabase, forEachDatabase, type TestDatabase } from '../support/databases.ts';

// 0047: the batches there are take their accept_order in the order the code before applied them.
forEachDatabase((dialect) => {
  let t: TestDatabase;
  beforeEach(async () => {
    t = await createTestDatabase(dialect, { empty: true });
  });
  afterEach(() => t.close());

  it('numbers the batches there are by when they were accepted, not as their rows lie, new ones after', async () => {
    const migrator = new Migrator({ db: t.db, provider: { getMigrations: async () => migrations } });
    assert.ifError((await migrator.migrateTo('0046_contact_batches_queued_account')).error);
    const account = await createAccount(t.db, new ManualClock(), {
      userName: 'alice@example.com',
      password: 'a long enough password',
    });
    const listId = '11111111-0000-4000-8000-000000000001';
    await sql`insert into contact_lists (id, account_id, name, name_key, is_default, created_at)
              values (${listId}, ${account.id}, 'Spring', 'spring', ${sql.lit(false)}, 0)`.execute(t.db);
    const batch = (id: string, createdAt: number) =>
      sql`insert into contact_batches (id, account_id, list_id, status, contact_count, created_at)
          values (${id}, ${account.id}, ${listId}, 'Queued', 1, ${createdAt})`.execute(t.db);
    // Rows do not lie in the order accepted (a row written into space a deleted one left, on PostgreSQL).
    const later = '22222222-0000-4000-8000-000000000002';
    const earlier = '33333333-0000-4000-8000-000000000003';
    await batch(later, 2000);
    await batch(earlier, 1000);

    assert.ifError((await migrator.migrateTo('0047_contact_batches_accept_order')).error);
    const next = '44444444-0000-4000-8000-000000000004';
    await t.db
      .insertInto('contact_batches')
      .values({
        id: next,
        account_id: account.id,
        list_id: listId,
        webhook_url: null,
        status: 'Queued',
        contact_count: 1,
        inserted_ids: null,
        updated_ids: null,
        skipped_ids: null,
        error: null,
        created_at: 0,
        started_at: null,
        completed_at: null,
        accept_order: NEXT_ACCEPT_ORDER[dialect],
      })
      .execute();
    const rows = await t.db.selectFrom('contact_batches').select('id').orderBy('accept_order').execute();
    assert.deepEqual(
      rows.map((row) => row.id),
      [earlier, later, next],
    );
  });
});
