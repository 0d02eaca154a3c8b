import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { createTestDatabase, forEachDatabase, type TestDatabase } from '../support/databases.ts';
import { listBefore } from './migration-support.ts';

// 0035: a contact batch's record no longer goes with the list it added to.
forEachDatabase((dialect) => {
  let t: TestDatabase;
  beforeEach(async () => {
    t = await createTestDatabase(dialect, { empty: true });
  });
  afterEach(() => t.close());

  it('keeps every batch as it was, and keeps it when its list is deleted; the status check stays', async () => {
    const { accountId, listId, migrateTo } = await listBefore(t.db, '0034_quiet_hours');
    const batch = {
      id: '22222222-0000-4000-8000-000000000002',
      account_id: accountId,
      list_id: listId,
      webhook_url: 'https://example.com/hook',
      status: 'Completed' as const,
      contact_count: 2,
      inserted_ids: '[1]',
      updated_ids: '[2]',
      skipped_ids: '[]',
      error: null,
      created_at: 1000,
      started_at: 2000,
      completed_at: 3000,
    };
    await t.db.insertInto('contact_batches').values(batch).execute();

    await migrateTo('0035_contact_batches_outlive_lists');
    const read = async () => {
      const row = await t.db.selectFrom('contact_batches').selectAll().executeTakeFirstOrThrow();
      return {
        ...row,
        created_at: Number(row.created_at),
        started_at: Number(row.started_at),
        completed_at: Number(row.completed_at),
        contact_count: Number(row.contact_count),
      };
    };
    assert.deepEqual(await read(), batch);
    await t.db.deleteFrom('contact_lists').where('id', '=', listId).execute();
    assert.deepEqual(await read(), batch, 'the record outlives its list');
    await assert.rejects(
      t.db
        .insertInto('contact_batches')
        .values({ ...batch, id: '33333333-0000-4000-8000-000000000003', status: 'Lost' as never })
        .execute(),
    );
    // Still the account's: deleting it takes its batches.
    await t.db.deleteFrom('accounts').where('id', '=', accountId).execute();
    assert.equal((await t.db.selectFrom('contact_batches').selectAll().execute()).length, 0);
  });
});
