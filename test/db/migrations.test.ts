import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { randomUUID } from 'node:crypto';
import { Migrator, sql } from 'kysely';
import { migrations } from '../../src/db/migrations/index.ts';
import { MigrationError, migrateToLatest } from '../../src/db/database.ts';
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

  it('starts on a database a newer Herald migrated, and refuses one from another line of versions', async () => {
    assert.ok((await migrateToLatest(t)).length > 0);
    const last = Object.keys(migrations).at(-1)!;
    // `herald migrate` of the next version ran, and a process of this one restarts meanwhile.
    await sql`insert into kysely_migration (name, timestamp) values ('9999_from_a_newer_herald', '2030-01-01')`.execute(
      t.db,
    );
    assert.deepEqual(await migrateToLatest(t), [], 'it runs on the schema as it is');
    await sql`delete from kysely_migration where name = ${last}`.execute(t.db);
    await assert.rejects(migrateToLatest(t), (error: unknown) => {
      assert.ok(error instanceof MigrationError);
      assert.equal(
        error.message,
        `the database holds migrations this Herald does not know (9999_from_a_newer_herald) and lacks ${last}: ` +
          'run the Herald that migrated it, or a newer one',
      );
      return true;
    });
  });
});
