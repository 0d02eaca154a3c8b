import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { sql } from 'kysely';
import { NEXT_ACCEPT_ORDER } from '../../src/crm/queries.ts';
import { createTestDatabase, forEachDatabase, type TestDatabase } from '../support/databases.ts';
import { listBefore } from './migration-support.ts';

// 0047: the batches there are take their accept_order in the order the code before applied them.
forEachDatabase((dialect) => {
  let t: TestDatabase;
  beforeEach(async () => {
    t = await createTestDatabase(dialect, { empty: true });
  });
  afterEach(() => t.close());

  it('numbers the batches there are by when they were accepted, not as their rows lie, new ones after', async () => {
    const { accountId, listId, migrateTo } = await listBefore(t.db, '0046_contact_batches_queued_account');
    const batch = (id: string, createdAt: number) =>
      sql`insert into contact_batches (id, account_id, list_id, status, contact_count, created_at)
          values (${id}, ${accountId}, ${listId}, 'Queued', 1, ${createdAt})`.execute(t.db);
    // Rows do not lie in the order accepted (a row written into space a deleted one left, on PostgreSQL).
    const later = '22222222-0000-4000-8000-000000000002';
    const earlier = '33333333-0000-4000-8000-000000000003';
    await batch(later, 2000);
    await batch(earlier, 1000);

    await migrateTo('0047_contact_batches_accept_order');
    const next = '44444444-0000-4000-8000-000000000004';
    await t.db
      .insertInto('contact_batches')
      .values({
        id: next,
        account_id: accountId,
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
