import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { Migrator, sql } from 'kysely';
import { randomUUID } from 'node:crypto';
import { applyBatch } from '../../src/crm/apply.ts';
import { listContactsPage } from '../../src/crm/contacts.ts';
import { migrateToLatest } from '../../src/db/database.ts';
import { migrations } from '../../src/db/migrations/index.ts';
import { createTestDatabase, forEachDatabase, type TestDatabase } from '../support/databases.ts';

// 0007 turns one numeric space of contactIds across accounts into one space per account,
// on a database holding contacts, memberships and a moved counter from before it.
forEachDatabase((dialect) => {
  let t: TestDatabase;
  beforeEach(async () => {
    t = await createTestDatabase(dialect, { empty: true });
  });
  afterEach(() => t.close());

  it('keeps every contact and membership under its id, and numbers each account on from the old counter', async () => {
    const migrator = new Migrator({ db: t.db, provider: { getMigrations: async () => migrations } });
    const { error } = await migrator.migrateTo('0006_queue_lanes');
    assert.ifError(error);
    // Accounts as they were then: later migrations change the table createAccount writes.
    const accountAsThen = async (id: string, userName: string) => {
      await sql`insert into accounts (id, user_name, user_name_key, password_hash, private_token,
                                      time_zone_offset, locale, created_at, updated_at)
                values (${id}, ${userName}, ${userName}, 'x', ${randomUUID()}, 'UTC+00:00', 'en', 0, 0)`.execute(t.db);
      await sql`insert into contact_lists (id, account_id, name, name_key, is_default, created_at)
                values (${randomUUID()}, ${id}, 'All contacts', 'all contacts', ${sql.lit(true)}, 0)`.execute(t.db);
      return { id };
    };
    const alice = await accountAsThen('a1a1a1a1-0000-4000-8000-000000000000', 'alice@example.com');
    const bob = await accountAsThen('b0b0b0b0-0000-4000-8000-000000000000', 'bob@example.com');
    const listOf = async (accountId: string, name: string) => {
      const id = `${accountId.slice(0, 8)}-0000-4000-8000-000000000001`;
      await sql`insert into contact_lists (id, account_id, name, name_key, is_default, created_at)
                values (${id}, ${accountId}, ${name}, ${name}, ${sql.lit(false)}, 0)`.execute(t.db);
      return id;
    };
    const [alicesList, bobsList] = [await listOf(alice.id, 'a'), await listOf(bob.id, 'b')];
    const contact = (id: number, accountId: string, email: string) =>
      sql`insert into contacts (id, account_id, email, mobile, mobile_country_code, mobile_opt_in, email_opt_in,
                                properties, created_at, updated_at)
          values (${id}, ${accountId}, ${email}, null, null, ${sql.lit(false)}, ${sql.lit(true)}, '{}', 0, 0)`.execute(
        t.db,
      );
    await contact(1, alice.id, 'a1@example.com');
    await contact(2, bob.id, 'b2@example.com');
    await contact(3, alice.id, 'a3@example.com');
    await contact(1000, bob.id, 'chosen@example.com');
    await sql`insert into list_members (list_id, contact_id, added_at)
              values (${alicesList}, 3, 0), (${bobsList}, 2, 0)`.execute(t.db);
    if (dialect === 'postgres') await sql`select setval('contact_ids', 3)`.execute(t.db);
    else await sql`update contact_ids set last_value = 3`.execute(t.db);

    assert.equal((await migrateToLatest(t))[0], '0007_contact_ids_per_account', 'later migrations follow it');

    const page = async (accountId: string, listId: string) =>
      (await listContactsPage(t.db, accountId, listId, { limit: 100 })).contacts.map((c) => [c.contactId, c.email]);
    assert.deepEqual(await page(alice.id, alicesList), [[3, 'a3@example.com']]);
    assert.deepEqual(await page(bob.id, bobsList), [[2, 'b2@example.com']]);
    const allContacts = async (accountId: string) =>
      (
        await t.db
          .selectFrom('contact_lists')
          .select('id')
          .where('account_id', '=', accountId)
          .where('is_default', '=', true)
          .executeTakeFirstOrThrow()
      ).id;
    assert.deepEqual(await page(bob.id, await allContacts(bob.id)), [
      [2, 'b2@example.com'],
      [1000, 'chosen@example.com'],
    ]);

    // Both accounts go on from the old counter; Alice may now hold Bob's id 2 as her own.
    const applied = async (accountId: string, listId: string, entries: Array<{ contactId?: number; email: string }>) =>
      (await t.db.transaction().execute((trx) => applyBatch(trx, dialect, 1, { accountId, listId }, entries))).inserted;
    assert.deepEqual(
      await applied(alice.id, alicesList, [{ email: 'a-new@example.com' }, { contactId: 2, email: 'a2@example.com' }]),
      [4, 2],
    );
    assert.deepEqual(await applied(bob.id, bobsList, [{ email: 'b-new@example.com' }]), [4]);
    assert.deepEqual(await page(alice.id, alicesList), [
      [2, 'a2@example.com'],
      [3, 'a3@example.com'],
      [4, 'a-new@example.com'],
    ]);
    assert.deepEqual(await page(bob.id, bobsList), [
      [2, 'b2@example.com'],
      [4, 'b-new@example.com'],
    ]);
  });
});
