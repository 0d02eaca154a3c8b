import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { randomUUID } from 'node:crypto';
import { Migrator, sql } from 'kysely';
import { migrations } from '../../src/db/migrations/index.ts';
import { createTestDatabase, forEachDatabase, type TestDatabase } from '../support/databases.ts';

// A migration is all or nothing on both databases: one that fails leaves the database as it
// was, and runs whole once what stopped it is mended.
forEachDatabase((dialect) => {
  let t: TestDatabase;
  beforeEach(async () => {
    t = await createTestDatabase(dialect, { empty: true });
  });
  afterEach(() => t.close());

  it('leaves a migration that fails halfway undone, and runs it whole the next time', async () => {
    const migrator = new Migrator({ db: t.db, provider: { getMigrations: async () => migrations } });
    assert.ifError((await migrator.migrateTo('0016_smpp_submits')).error);
    // Before 0017 two accounts could hold one numeric sender name; its unique index, made after
    // its new columns and tables, refuses them.
    for (const userName of ['alice@example.com', 'bob@example.com']) {
      const id = randomUUID();
      await sql`insert into accounts (id, user_name, user_name_key, password_hash, private_token, time_zone_offset,
                                      locale, created_at, updated_at)
                values (${id}, ${userName}, ${userName}, 'a hash', ${randomUUID()}, '+00:00', 'en', 0, 0)`.execute(
        t.db,
      );
      await sql`insert into sender_names (account_id, name, created_at) values (${id}, '12345', 0)`.execute(t.db);
    }
    const failed = await migrator.migrateTo('0017_inbound_sms');
    assert.ok(failed.error, 'the duplicate stops it');
    const tables = async () => (await t.db.introspection.getTables()).map((table) => table.name);
    assert.ok(!(await tables()).includes('sms_inbound'), 'nothing of it is left');

    await sql`delete from sender_names where account_id = (select min(account_id) from sender_names)`.execute(t.db);
    assert.ifError((await migrator.migrateTo('0017_inbound_sms')).error);
    assert.ok((await tables()).includes('sms_inbound'));
  });
});
