import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { sql } from 'kysely';
import { PLAN_ONCE } from '../../src/db/prepared.ts';
import { createTestDatabase, forEachDatabase, type TestDatabase } from '../support/databases.ts';

forEachDatabase((dialect) => {
  let database: TestDatabase;
  beforeEach(async () => {
    database = await createTestDatabase(dialect, { poolSize: 1 });
  });
  afterEach(() => database.close());

  const marked = (n: number) => sql<{ n: number }>`${sql.raw(PLAN_ONCE)} select ${n} + 1 as n`;
  const unmarked = (n: number) => sql<{ n: number }>`select ${n} + 2 as n`;

  it('answers a statement planned once as any other', async () => {
    assert.equal(Number((await marked(6).execute(database.db)).rows[0].n), 7);
    assert.equal(Number((await unmarked(6).execute(database.db)).rows[0].n), 8);
  });

  if (dialect === 'postgres') {
    const prepared = async (pattern: string) =>
      (
        await sql<{ n: number }>`select count(*)::int as n from pg_prepared_statements
                                  where statement like ${pattern}`.execute(database.db)
      ).rows[0].n;

    it('prepares the statements marked to be planned once, and only those', async () => {
      for (let i = 0; i < 8; i++) {
        await marked(i).execute(database.db);
        await unmarked(i).execute(database.db);
      }
      assert.equal(await prepared('%+ 1 as n'), 1);
      assert.equal(await prepared('%+ 2 as n'), 0, 'an unmarked statement is planned with its values each run');
    });

    it('prepares a marked statement whose text begins with whitespace', async () => {
      for (let i = 0; i < 3; i++)
        await sql`
        ${sql.raw(PLAN_ONCE)} select ${i} + 3 as n`.execute(database.db);
      assert.equal(await prepared('%+ 3 as n'), 1);
    });

    it('leaves PostgreSQL free to keep plans, so foreign-key checks are not planned for each row', async () => {
      const { rows } = await sql<{ mode: string }>`select current_setting('plan_cache_mode') as mode`.execute(
        database.db,
      );
      assert.equal(rows[0].mode, 'auto');
    });
  }
});
