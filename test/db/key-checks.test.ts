import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { sql } from 'kysely';
import { withKeyChecksCached } from '../../src/db/prepared.ts';
import { createTestDatabase, forEachDatabase, type TestDatabase } from '../support/databases.ts';

forEachDatabase((dialect) => {
  let database: TestDatabase;
  beforeEach(async () => {
    database = await createTestDatabase(dialect, { poolSize: 1 });
  });
  afterEach(() => database.close());

  const planCacheMode = async (db = database.db) =>
    (await sql<{ mode: string }>`select current_setting('plan_cache_mode') as mode`.execute(db)).rows[0].mode;

  if (dialect === 'postgres') {
    it('runs the write with cached plans for its key checks, and plans each statement again after it', async () => {
      assert.equal(await planCacheMode(), 'force_custom_plan');
      await database.db.transaction().execute(async (trx) => {
        assert.equal(await withKeyChecksCached(trx, dialect, () => planCacheMode(trx)), 'auto');
        assert.equal(await planCacheMode(trx), 'force_custom_plan');
      });
      assert.equal(await planCacheMode(), 'force_custom_plan');
    });

    it('sends the write’s statements unprepared, so none is given a generic plan', async () => {
      const prepared = async (text: string) =>
        (
          await sql<{
            n: number;
          }>`select count(*)::int as n from pg_prepared_statements where statement = ${text}`.execute(database.db)
        ).rows[0].n;
      const text = 'select $1::int + 1 as n';
      await database.db.transaction().execute(async (trx) => {
        for (let i = 0; i < 8; i++) {
          await withKeyChecksCached(trx, dialect, () => sql`select ${i}::int + 1 as n`.execute(trx));
        }
      });
      assert.equal(await prepared(text), 0);
      for (let i = 0; i < 8; i++) await sql`select ${i}::int + 1 as n`.execute(database.db);
      assert.equal(await prepared(text), 1, 'run often enough outside, it is prepared');
    });

    it('refuses to run outside a transaction, where SET LOCAL would do nothing', async () => {
      await assert.rejects(
        withKeyChecksCached(database.db, dialect, () => planCacheMode()),
        /runs in the caller’s transaction/,
      );
    });

    it('leaves the connection as it was when the write fails', async () => {
      await assert.rejects(
        database.db
          .transaction()
          .execute((trx) => withKeyChecksCached(trx, dialect, () => sql`select 1 / 0`.execute(trx))),
        /division by zero/,
      );
      assert.equal(await planCacheMode(), 'force_custom_plan');
    });
  }

  it('answers what the write answers', async () => {
    const rows = await database.db
      .transaction()
      .execute((trx) => withKeyChecksCached(trx, dialect, () => sql<{ n: number }>`select 7 as n`.execute(trx)));
    assert.equal(Number(rows.rows[0].n), 7);
  });
});
