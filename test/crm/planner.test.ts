import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CompiledQuery, sql } from 'kysely';
import { createAccount } from '../../src/accounts/service.ts';
import { ManualClock } from '../../src/clock.ts';
import { candidatesQuery, updateQuery, type CandidateKeys } from '../../src/crm/queries.ts';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';

const STORED = 20_000;

/**
 * The plan of the batch's match statement on a fresh database, never analysed, holding
 * STORED contacts that have only an email or only a mobile (`only`), for `keys`.
 */
async function planOnFreshDatabase(
  only: 'email' | 'mobile',
  keys: Pick<CandidateKeys, 'mobiles' | 'emails'>,
): Promise<string> {
  const t: TestDatabase = await createTestDatabase('postgres');
  try {
    const account = await createAccount(t.db, new ManualClock(), {
      userName: 'planner@example.com',
      password: 'a long enough password',
    });
    const allContacts = await t.db
      .selectFrom('contact_lists')
      .select('id')
      .where('account_id', '=', account.id)
      .executeTakeFirstOrThrow();
    // Autovacuum would analyse the table a minute after the load, at a time of its choosing.
    await sql`alter table contacts set (autovacuum_enabled = false)`.execute(t.db);
    await sql`
      insert into contacts (id, account_id, email, mobile, mobile_country_code, mobile_opt_in, email_opt_in, properties,
                            created_at, updated_at)
      select n, ${account.id},
             case when ${only} = 'email' then 'contact' || n || '@example.com' end,
             case when ${only} = 'mobile' then '9198' || lpad(n::text, 8, '0') end,
             case when ${only} = 'mobile' then '91' end,
             false, false, '{}', 0, 0
        from generate_series(1, ${STORED}::int) n`.execute(t.db);
    const { rows: stats } = await sql<{ analysed: boolean }>`
      select last_analyze is not null or last_autoanalyze is not null as analysed
        from pg_stat_user_tables where relname = 'contacts'`.execute(t.db);
    assert.equal(stats[0].analysed, false);

    const statement = candidatesQuery('postgres', {
      accountId: account.id,
      listId: allContacts.id,
      allContactsListId: allContacts.id,
      ids: [],
      pairs: [],
      ...keys,
    }).compile(t.db);
    const { rows } = await t.db.executeQuery<{ 'QUERY PLAN': string }>(
      CompiledQuery.raw(`explain ${statement.sql}`, [...statement.parameters]),
    );
    return rows.map((row) => row['QUERY PLAN']).join('\n');
  } finally {
    await t.close();
  }
}

// PostgreSQL only: what goes wrong is its planner guessing without statistics. A seek by
// `mobile is null` in contacts_mobile reads every email-only contact of the account for
// each email of a batch, the quadratic slowdown of a fresh database (and the same the
// other way round).
describe('postgres: the email-only and mobile-only match on a database never analysed', () => {
  it('seeks an email-only contact by its email, not by its missing mobile', async () => {
    const plan = await planOnFreshDatabase('email', { mobiles: [], emails: ['contact2@example.com'] });
    assert.match(
      plan,
      /Index Scan using contacts_email on contacts[ \w]*\(.*\n.*Index Cond: \(.*email = p\w*\.email\)/,
    );
    assert.doesNotMatch(plan, /Index Cond: .*IS NULL/);
  });

  it('seeks a mobile-only contact by its mobile, not by its missing email', async () => {
    const plan = await planOnFreshDatabase('mobile', { mobiles: ['919800000001'], emails: [] });
    assert.match(
      plan,
      /Index Scan using contacts_mobile on contacts[ \w]*\(.*\n.*Index Cond: \(.*mobile = p\w*\.mobile\)/,
    );
    assert.doesNotMatch(plan, /Index Cond: .*IS NULL/);
  });
});

// SQLite: contacts are keyed (account_id, id) in an index beside the rowid. An UPDATE … FROM
// the batch's rows was planned as a scan of the account's contacts with the batch's rows
// inside it, a full pass per row (1.5 s a batch at 20,000 contacts); it must seek each row.
describe('sqlite: the updates of a batch seek each contact by its key', () => {
  for (const what of ['whole', 'data'] as const) {
    it(`never scans the contacts table (${what})`, async () => {
      const t = await createTestDatabase('sqlite');
      try {
        const row = { id: 1, email: null, mobile: '919800000001', countryCode: '91', properties: '{}' };
        const contacts = [{ ...row, mobileOptIn: true, emailOptIn: false }];
        const statement = updateQuery('sqlite', what, 'an-account', 0, contacts).compile(t.db);
        const { rows } = await t.db.executeQuery<{ detail: string }>(
          CompiledQuery.raw(`explain query plan ${statement.sql}`, [...statement.parameters]),
        );
        const plan = rows.map((row) => row.detail);
        assert.ok(
          plan.some((step) => /SEARCH contacts USING INTEGER PRIMARY KEY/.test(step)),
          plan.join('\n'),
        );
        assert.ok(!plan.some((step) => /^SCAN contacts/.test(step)), plan.join('\n'));
      } finally {
        await t.close();
      }
    });
  }
});
