import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, it } from 'node:test';
import { CompiledQuery, ParseJSONResultsPlugin, sql } from 'kysely';
import { createAccount } from '../../src/accounts/service.ts';
import { systemClock } from '../../src/clock.ts';
import { queries, type LimitKeys, type LimitRows } from '../../src/verify/queries.ts';
import { createTestDatabase, forEachDatabase, type TestDatabase } from '../support/databases.ts';

// What a group of starts' limits count is read by each number and prefix, whatever the tables'
// statistics say of the account (verify/queries.ts, limitRows): an account whose verifications
// grew since they were taken (a new one, or one under an attack of SMS pumping) must not have
// every verification of its read for each start.
forEachDatabase((dialect) => {
  let database: TestDatabase;
  beforeEach(async () => {
    database = await createTestDatabase(dialect);
  });
  afterEach(() => database.close());

  const T0 = Date.UTC(2026, 10, 29, 12);
  const newAccount = (name: string) =>
    createAccount(database.db, systemClock, {
      userName: `${name}-${randomUUID()}@example.com`,
      password: 'correct horse battery staple',
    });

  /** `count` pending verifications of `accountId`, to numbers from `first` on, one sent code each. */
  async function verifications(accountId: string, first: number, count: number) {
    for (let start = 0; start < count; start += 500) {
      const numbers = Array.from({ length: Math.min(500, count - start) }, (_, i) => String(first + start + i));
      await database.db
        .insertInto('verifications')
        .values(
          numbers.map((recipient, i) => ({
            id: randomUUID(),
            account_id: accountId,
            channel: 'sms' as const,
            recipient,
            country: 'IN',
            prefix: recipient.slice(0, 6),
            code_hash: 'salt.hash',
            status: 'pending' as const,
            attempts_left: 5,
            send_attempts: 1,
            last_sent_at: T0 + start + i,
            expires_at: T0 + 600_000,
            webhook_url: null,
            created_at: T0 + start + i,
            ended_at: null,
          })),
        )
        .execute();
      await database.db
        .insertInto('verification_sends')
        .values(numbers.map((recipient, i) => ({ account_id: accountId, recipient, at: T0 + start + i })))
        .execute();
    }
  }

  it('reads by number and prefix an account whose verifications grew since the statistics', async () => {
    const [settled, growing] = [await newAccount('settled'), await newAccount('growing')];
    await verifications(settled.id, 919_200_000_000, 5_000);
    await sql`analyze`.execute(database.db);
    await verifications(growing.id, 919_100_000_000, 3_000);

    const keys: LimitKeys = {
      numbers: [
        [growing.id, '919100000007'],
        [growing.id, '919100009999'],
      ],
      prefixes: [[growing.id, '919100', 100]],
      since: T0 + 2_990,
      mostSends: 5,
    };
    const statement = queries[dialect].limitRows(database.db, keys);
    const explain = dialect === 'postgres' ? 'explain ' : 'explain query plan ';
    const plan = (await database.db.executeQuery(CompiledQuery.raw(explain + statement.sql, [...statement.parameters])))
      .rows as Array<Record<string, unknown>>;
    const lines = plan.map((row) => String(row['QUERY PLAN'] ?? row.detail));
    const text = lines.join('\n');
    if (dialect === 'postgres') {
      for (const [table, key] of [
        ['verifications', 'recipient'],
        ['verification_sends', 'recipient'],
        ['verifications', 'prefix'],
      ]) {
        assert.ok(
          lines.some(
            (line, i) =>
              line.includes('Index') &&
              line.includes(` on ${table} `) &&
              new RegExp(`\\(${key} = k(_\\d+)?\\.${key}\\)`).test(lines[i + 1] ?? ''),
          ),
          `${table} looked up by account and ${key}:\n${text}`,
        );
      }
    } else {
      for (const index of ['verifications_recipient', 'verification_sends_recipient']) {
        assert.match(text, new RegExp(`INDEX ${index} \\(account_id=\\? AND recipient=\\?`), text);
      }
      assert.match(text, /INDEX verifications_prefix \(account_id=\? AND prefix=\?/, text);
    }

    const [read] = (await database.db.withPlugin(new ParseJSONResultsPlugin()).executeQuery(statement))
      .rows as LimitRows[];
    assert.deepEqual(
      read.pending.map((row) => row.recipient),
      ['919100000007'],
      'the pending verification of each number: none to the second',
    );
    assert.deepEqual(read.sends, [], 'no code to either number since then');
    assert.deepEqual(
      read.made.map((row) => Number(row.created_at)).sort(),
      Array.from({ length: 9 }, (_, i) => T0 + 2_991 + i),
      'the verifications made to the prefix since then',
    );
  });
});
