import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { openDatabase, type Database } from '../../src/db/database.ts';
import { createTestDatabase, forEachDatabase, type TestDatabase } from '../support/databases.ts';
import { endsItsThread } from './support/exiting-procedure.ts';

const EXITING = new URL('./support/exiting-procedure.ts', import.meta.url).href;

// SQLite runs on a thread of its own (db/sqlite.ts): one that stops unasked is reported, so that
// serve stops (server.ts) rather than answer every request with an error for good.
forEachDatabase((dialect) => {
  if (dialect !== 'sqlite') return;
  let database: TestDatabase;
  let opened: Database;
  beforeEach(async () => {
    database = await createTestDatabase(dialect);
    opened = openDatabase(database.url, { procedures: [EXITING] });
    await opened.ready();
  });
  afterEach(async () => {
    await opened.close();
    await database.close();
  });

  it('reports a thread that stopped unasked, and refuses what is asked of it then', async () => {
    await assert.rejects(opened.call(endsItsThread, undefined), /the SQLite thread has stopped \(exit code 3\)/);
    const lost = await opened.lost;
    assert.match(String(lost), /exit code 3/);
    await assert.rejects(opened.db.selectFrom('accounts').selectAll().execute(), /has stopped/);
  });

  it('reports nothing when the database is closed', async () => {
    await opened.db.selectFrom('accounts').selectAll().execute();
    await opened.close();
    const settled = await Promise.race([opened.lost, new Promise((resolve) => setTimeout(resolve, 200, 'none'))]);
    assert.equal(settled, 'none');
  });
});
