import { atEveryHash } from './support/hash-watch.ts';
import assert from 'node:assert/strict';
import { DatabaseSync } from 'node:sqlite';
import { afterEach, beforeEach, it } from 'node:test';
import { sql } from 'kysely';
import { createAccount } from '../../src/accounts/service.ts';
import { forEachDatabase } from '../support/databases.ts';
import { ADMIN_TOKEN, bearer, startTestApp, type TestApp } from '../support/app.ts';

/**
 * A password hash takes about 30 ms of CPU. Account creation does it before its
 * transaction, which holds only SQL: on SQLite that transaction holds the only writing
 * connection, and every other write of the process would wait the hash out.
 */
forEachDatabase((dialect) => {
  let t: TestApp;
  let sqlite: DatabaseSync | undefined;
  beforeEach(async () => {
    t = await startTestApp(dialect);
    if (dialect === 'sqlite') sqlite = new DatabaseSync(t.database.url.slice('sqlite:'.length));
  });
  afterEach(async () => {
    sqlite?.close();
    await t.close();
  });

  /**
   * Whether a transaction of the application is open: on SQLite, one holding the write lock, so
   * that another connection cannot take it at once.
   */
  const transactionOpen = async (): Promise<boolean> => {
    if (sqlite) {
      try {
        sqlite.exec('begin immediate');
      } catch (error) {
        if ((error as { errstr?: string }).errstr === 'database is locked') return true;
        throw error;
      }
      sqlite.exec('rollback');
      return false;
    }
    const { rows } = await sql<{ open: number }>`
      select count(*)::int as open from pg_stat_activity
       where datname = current_database() and pid <> pg_backend_pid() and state like 'idle in transaction%'`.execute(
      t.database.db,
    );
    return rows[0].open > 0;
  };

  const newAccount = (n: number) => ({ userName: `ada${n}@example.com`, password: 'correct horse battery staple' });
  const post = (n: number, headers: Record<string, string> = {}) =>
    t.app.inject({
      method: 'POST',
      url: '/admin/accounts',
      headers: { ...bearer(ADMIN_TOKEN), ...headers },
      payload: newAccount(n),
    });
  const creations: Array<[string, (n: number) => Promise<unknown>]> = [
    ['POST /admin/accounts', (n) => post(n)],
    ['POST /admin/accounts with an Idempotency-Key', (n) => post(n, { 'idempotency-key': `key-${n}` })],
    ["the CLI's account create", (n) => createAccount(t.database.db, t.clock, newAccount(n))],
  ];

  it('hashes a new account’s password with no transaction open, so no other write waits for the hash', async () => {
    for (const [n, [how, create]] of creations.entries()) {
      const seen: boolean[] = [];
      const stop = atEveryHash(async () => void seen.push(await transactionOpen()));
      try {
        await create(n);
      } finally {
        stop();
      }
      // A hash moved into the SQLite procedure would run on the database's thread, unseen here.
      assert.deepEqual(seen, [false], `${how}: one hash here, with no transaction open`);
    }
    assert.equal((await t.database.db.selectFrom('accounts').select('id').execute()).length, creations.length);
  });
});
