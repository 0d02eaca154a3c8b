import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, it } from 'node:test';
import { Migrator, sql } from 'kysely';
import { findAccountByUserName, privateTokenMatches } from '../../src/auth/credentials.ts';
import { migrateToLatest } from '../../src/db/database.ts';
import { migrations } from '../../src/db/migrations/index.ts';
import { createTestDatabase, forEachDatabase, type TestDatabase } from '../support/databases.ts';

// 0018 replaces each account's private token by its hash, on a database holding tokens in clear.
forEachDatabase((dialect) => {
  let t: TestDatabase;
  beforeEach(async () => {
    t = await createTestDatabase(dialect, { empty: true });
  });
  afterEach(() => t.close());

  it('keeps every account able to sign in with the token it had, which the table no longer holds', async () => {
    const migrator = new Migrator({ db: t.db, provider: { getMigrations: async () => migrations } });
    assert.ifError((await migrator.migrateTo('0017_inbound_sms')).error);
    const tokens = [randomUUID(), randomUUID().toUpperCase()];
    for (const [i, token] of tokens.entries()) {
      const userName = `user${i}@example.com`;
      await sql`insert into accounts (id, user_name, user_name_key, password_hash, private_token,
                                      time_zone_offset, locale, created_at, updated_at)
                values (${randomUUID()}, ${userName}, ${userName}, 'x', ${token}, 'UTC+00:00', 'en', 0, 0)`.execute(
        t.db,
      );
    }

    assert.equal((await migrateToLatest(t))[0], '0018_private_token_hashes', 'later migrations follow it');

    for (const [i, token] of tokens.entries()) {
      const account = (await findAccountByUserName(t.db, `user${i}@example.com`))!;
      assert.ok(privateTokenMatches(account, token), `account ${i} signs in with its token`);
      assert.ok(privateTokenMatches(account, token.toLowerCase()));
      assert.ok(!privateTokenMatches(account, tokens[1 - i]));
      assert.ok(!JSON.stringify(account).toLowerCase().includes(token.toLowerCase()));
    }
  });
});
