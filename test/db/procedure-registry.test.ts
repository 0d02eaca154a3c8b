import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { sql } from 'kysely';
import { openDatabase } from '../../src/db/database.ts';
import { PROCEDURE_MODULES } from '../../src/server/procedures.ts';
import { createTestDatabase, forEachDatabase, type TestDatabase } from '../support/databases.ts';
import { modulesLoadedWith } from './support/import-graph.ts';

const MISNAMED = new URL('./support/misnamed-procedure.ts', import.meta.url).href;

forEachDatabase((dialect) => {
  let database: TestDatabase;
  beforeEach(async () => {
    database = await createTestDatabase(dialect);
  });
  afterEach(() => database.close());

  it("resolves every procedure of the application's registry at start", async () => {
    await database.ready();
  });

  it('refuses to start with a procedure exported under another name than its ref gives', async () => {
    const misnamed = openDatabase(database.url, { procedures: [MISNAMED] });
    try {
      await assert.rejects(misnamed.ready(), /exports the procedure applyBatch under the ref applyBatchJob/);
      // On SQLite the database's thread refuses too: no statement runs there.
      if (dialect === 'sqlite')
        await assert.rejects(sql`select 1`.execute(misnamed.db), /exports the procedure applyBatch/);
    } finally {
      await misnamed.close();
    }
  });
});

/**
 * Every module the SQLite thread loads is loaded again for each database opened (in the tests,
 * hundreds) and held twice in memory: the main thread's libraries stay out of its graph.
 */
it("keeps libphonenumber, jose, the pg driver and the migrations out of the procedures' modules", async () => {
  const loaded = await modulesLoadedWith(PROCEDURE_MODULES);
  assert.ok(loaded.some((url) => url.endsWith('/src/crm/apply.ts')));
  const mainThreadOnly = /\/node_modules\/(libphonenumber-js|jose|pg|pg-pool)\/|\/src\/db\/migrations\//;
  assert.deepEqual(
    loaded.filter((url) => mainThreadOnly.test(url)),
    [],
  );
});
