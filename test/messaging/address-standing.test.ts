import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, it } from 'node:test';
import { CompiledQuery, sql } from 'kysely';
import { createAccount } from '../../src/accounts/service.ts';
import { systemClock } from '../../src/clock.ts';
import { erasedAddress } from '../../src/messaging/erased-identifiers.ts';
import { addressStanding, standingsRead, type Channel } from '../../src/messaging/recipients.ts';
import { createTestDatabase, forEachDatabase, type TestDatabase } from '../support/databases.ts';

/**
 * The checks of concurrent requests are read together, one statement for a group: each still
 * gets its own address's standing in its own account, whatever the others in its group ask.
 */
forEachDatabase((dialect) => {
  let database: TestDatabase;
  let accounts: { a: string; b: string };
  const erasureKey = Buffer.alloc(32, 7);
  const numbers = { optedOut: '4915100000001', twice: '4915100000002', suppressed: '4915100000003' };
  const erased = '4915100000004';
  const free = '4915100000005';

  beforeEach(async () => {
    database = await createTestDatabase(dialect, { poolSize: 1 });
    const { db } = database;
    const account = async () =>
      (
        await createAccount(db, systemClock, {
          userName: `standing-${randomUUID()}@example.com`,
          password: 'correct horse battery staple',
        })
      ).id;
    accounts = { a: await account(), b: await account() };
    const contact = (id: number, mobile: string, optedIn: boolean, updatedAt: number) => ({
      id,
      account_id: accounts.a,
      email: null,
      mobile,
      mobile_country_code: '49',
      mobile_opt_in: optedIn,
      email_opt_in: false,
      properties: '{}',
      created_at: 1,
      updated_at: updatedAt,
    });
    // Account a alone holds these: a contact without consent, a number held twice (the later
    // update, contact 3, is the one its tags come from), a suppression and an erased person's.
    await db
      .insertInto('contacts')
      .values([
        contact(1, numbers.optedOut, false, 10),
        contact(2, numbers.twice, true, 10),
        contact(3, numbers.twice, true, 20),
      ])
      .execute();
    await db
      .insertInto('suppressions')
      .values({ account_id: accounts.a, channel: 'sms', address: numbers.suppressed, reason: 'STOP', created_at: 1 })
      .execute();
    await db
      .insertInto('erased_suppressions')
      .values({
        account_id: accounts.a,
        channel: 'sms',
        hash: erasedAddress(erasureKey, erased),
        reason: 'erased',
        created_at: 1,
      })
      .execute();
  });
  afterEach(() => database.close());

  const check = (accountId: string, address: string, optIn = true, channel: Channel = 'sms') =>
    addressStanding(database.db, channel, accountId, address, { optIn, erasureKey });

  it('answers each check of a group by its own account and address', async () => {
    // Issued together: the first is read alone, the rest while it is, as one group.
    const [first, ...group] = await Promise.all([
      check(accounts.b, free),
      check(accounts.a, numbers.optedOut),
      check(accounts.b, numbers.optedOut),
      check(accounts.a, numbers.twice),
      check(accounts.b, numbers.twice),
      check(accounts.a, numbers.suppressed),
      check(accounts.b, numbers.suppressed),
      check(accounts.a, erased),
      check(accounts.b, erased),
      check(accounts.a, numbers.optedOut, false),
      check(accounts.a, free),
    ]);
    assert.deepEqual(first, { refusal: undefined, contactId: null });
    assert.deepEqual(group, [
      { refusal: 'belongs to a contact whose mobileOptIn is false', contactId: 1 },
      { refusal: undefined, contactId: null },
      { refusal: undefined, contactId: 3 },
      { refusal: undefined, contactId: null },
      { refusal: 'is suppressed (STOP)', contactId: null },
      { refusal: undefined, contactId: null },
      { refusal: 'is suppressed (erased)', contactId: null },
      { refusal: undefined, contactId: null },
      { refusal: undefined, contactId: 1 },
      { refusal: undefined, contactId: null },
    ]);
  });

  it('keeps the channels apart: a mobile number checked as an email address finds no one', async () => {
    const [sms, email] = await Promise.all([
      check(accounts.a, numbers.suppressed),
      check(accounts.a, numbers.suppressed, true, 'email'),
    ]);
    assert.equal(sms.refusal, 'is suppressed (STOP)');
    assert.deepEqual(email, { refusal: undefined, contactId: null });
  });

  for (const [channel, contactsIndex] of [
    ['sms', 'contacts_mobile'],
    ['email', 'contacts_email'],
  ] as const)
    it(`looks each ${channel} address up by its keys, in the plan kept for every group`, async () => {
      const address = channel === 'sms' ? free : 'someone@example.com';
      const keys = [{ accountId: accounts.a, address, erasedHash: erasedAddress(erasureKey, address) }];
      const statement = standingsRead(dialect, channel, keys).compile(database.db);
      let plan: string;
      if (dialect === 'postgres') {
        // Planned while the tables are all but empty, the worst case for a plan kept for later.
        for (let i = 0; i < 8; i++) await check(accounts.a, address, true, channel);
        const { rows } = await sql<{ name: string; generic: number }>`
          select name, generic_plans::int as generic from pg_prepared_statements
           where statement like '%erased_suppressions%'`.execute(database.db);
        assert.equal(rows.length, 1, 'prepared once on the connection');
        assert.ok(rows[0].generic > 0, 'runs on its generic plan');
        // EXPLAIN EXECUTE takes no parameters of its own: the values as literals (all text here).
        const literals = statement.parameters.map((value) => `'${String(value).replaceAll("'", "''")}'`).join(', ');
        const explain = CompiledQuery.raw(`explain execute ${rows[0].name}(${literals})`);
        plan = (await database.db.executeQuery<{ 'QUERY PLAN': string }>(explain)).rows
          .map((row) => row['QUERY PLAN'])
          .join('\n');
        for (const index of [contactsIndex, 'suppressions_pkey', 'erased_suppressions_pkey'])
          assert.match(plan, new RegExp(`Index Scan using ${index} on `), plan);
        assert.doesNotMatch(plan, /Seq Scan|Hash Join|hashed/, plan);
        assert.match(plan, /channel = \$1/, `the plan kept for any values: ${plan}`);
      } else {
        const explain = CompiledQuery.raw(`explain query plan ${statement.sql}`, [...statement.parameters]);
        plan = (await database.db.executeQuery<{ detail: string }>(explain)).rows.map((row) => row.detail).join('\n');
        for (const index of [
          contactsIndex,
          'sqlite_autoindex_suppressions_1',
          'sqlite_autoindex_erased_suppressions_1',
        ])
          assert.match(plan, new RegExp(`USING INDEX ${index} \\(account_id=\\? AND`), plan);
        assert.doesNotMatch(plan, /SCAN (c|s|e)\b/, plan);
      }
    });
});
