import assert from 'node:assert/strict';
import { sql } from 'kysely';
import pg from 'pg';
import { afterEach, beforeEach, it } from 'node:test';
import { createTestDatabase, forEachDatabase, POSTGRES_ADMIN_URL, type TestDatabase } from '../support/databases.ts';
import { waitFor } from '../support/wait.ts';

// PostgreSQL ends its backends when it restarts (57P01) or fails over: a transaction in flight
// fails, and the process goes on with the pool's other connections.

forEachDatabase((dialect) => {
  if (dialect !== 'postgres') return;
  let database: TestDatabase;
  beforeEach(async () => {
    database = await createTestDatabase(dialect);
  });
  afterEach(() => database.close());

  it('fails a transaction whose backend is terminated, and goes on', async () => {
    const admin = new pg.Client({ connectionString: POSTGRES_ADMIN_URL });
    await admin.connect();
    try {
      const running = database.db.transaction().execute(async (trx) => {
        await sql`select pg_sleep(5) as backend_terminated_marker`.execute(trx);
      });
      const failed = assert.rejects(running, /terminat/);
      await waitFor('the backend running the transaction terminated', async () => {
        const { rows } = await admin.query(`select pg_terminate_backend(pid) as ended from pg_stat_activity
                                             where query like '%as backend_terminated_marker%'
                                               and pid <> pg_backend_pid()`);
        return rows.some((row) => row.ended) || undefined;
      });
      await failed;
      // The client's own 'error' event follows its query's error: it must not crash the process.
      await new Promise((resolve) => setTimeout(resolve, 100));
      const { rows } = await sql<{ one: number }>`select 1 as one`.execute(database.db);
      assert.equal(rows[0].one, 1);
    } finally {
      await admin.end();
    }
  });
});
