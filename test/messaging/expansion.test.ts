import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, it } from 'node:test';
import { systemClock } from '../../src/clock.ts';
import { createAccount } from '../../src/accounts/service.ts';
import { defaultListId } from '../../src/crm/setup.ts';
import { expandRecipients, requestRecipientsInsert } from '../../src/messaging/recipients.ts';
import { createTestDatabase, forEachDatabase, type TestDatabase } from '../support/databases.ts';

/**
 * An expansion a range of addresses at a time writes exactly what one range for everything
 * writes: which contact each number takes (the most recently updated), one row per number
 * across lists and ranges, the request's recipients first, consent and suppression per number.
 */
forEachDatabase((dialect) => {
  let database: TestDatabase;
  let accountId: string;
  let lists: { a: string; b: string; all: string };
  beforeEach(async () => {
    database = await createTestDatabase(dialect);
    const { db } = database;
    accountId = (
      await createAccount(db, systemClock, {
        userName: `expand-${randomUUID()}@example.com`,
        password: 'correct horse battery staple',
      })
    ).id;
    lists = { a: randomUUID(), b: randomUUID(), all: await defaultListId(db, accountId) };
    for (const [id, name] of [
      [lists.a, 'A'],
      [lists.b, 'B'],
    ]) {
      await db
        .insertInto('contact_lists')
        .values({ id, account_id: accountId, name, name_key: name.toLowerCase(), is_default: false, created_at: 1 })
        .execute();
    }
    // 40 contacts over 30 numbers: numbers 0-9 held twice (the later one updated more recently,
    // in the other list), every seventh contact without consent, one number suppressed.
    const contacts = Array.from({ length: 40 }, (_, i) => ({
      id: i + 1,
      mobile: String(919800000000 + (i % 30)),
      updated_at: 1000 + i,
      opted_in: i % 7 !== 3,
      list: i % 2 === 0 ? lists.a : lists.b,
    }));
    await db
      .insertInto('contacts')
      .values(
        contacts.map((c) => ({
          id: c.id,
          account_id: accountId,
          email: null,
          mobile: c.mobile,
          mobile_country_code: '91',
          mobile_opt_in: c.opted_in,
          email_opt_in: false,
          properties: '{}',
          created_at: c.updated_at,
          updated_at: c.updated_at,
        })),
      )
      .execute();
    await db
      .insertInto('list_members')
      .values(contacts.map((c) => ({ list_id: c.list, contact_id: c.id, added_at: 1 })))
      .execute();
    await db
      .insertInto('suppressions')
      .values({ account_id: accountId, channel: 'sms', address: '919800000012', reason: 'STOP', created_at: 1 })
      .execute();
  });
  afterEach(() => database.close());

  /** A send to `listIds` with two request recipients, expanded in ranges of `rangeSize`; its rows in id order. */
  async function expand(listIds: string[], rangeSize: number) {
    const { db } = database;
    const sendId = randomUUID();
    await db
      .insertInto('sends')
      .values({
        id: sendId,
        account_id: accountId,
        channel: 'sms',
        status: 'Queued',
        content: '{}',
        list_ids: JSON.stringify(listIds),
        webhook_url: null,
        scheduled_at: null,
        created_at: 1,
        started_at: null,
        completed_at: null,
      })
      .execute();
    await requestRecipientsInsert(dialect, [
      {
        sendId,
        now: 1,
        recipients: [
          { address: '919800000025', tags: '{"[x]":"own"}' },
          { address: '919899999999', tags: null },
        ],
      },
    ]).execute(db);
    let ranges = 0;
    for (let after: string | null = null; ; ) {
      ranges += 1;
      after = await db.transaction().execute((trx) =>
        expandRecipients(trx, dialect, {
          channel: 'sms',
          sendId,
          accountId,
          listIds,
          allContactsListId: lists.all,
          erasureKey: Buffer.alloc(32),
          after,
          now: 2,
          rangeSize,
        }),
      );
      if (after === null) break;
    }
    const rows = await db
      .selectFrom('send_recipients')
      .select(['address', 'contact_id', 'tags', 'status', 'reason'])
      .where('send_id', '=', sendId)
      .orderBy('id')
      .execute();
    const history = await db
      .selectFrom('recipient_history as h')
      .innerJoin('send_recipients as r', 'r.id', 'h.recipient_id')
      .select(['r.address', 'h.status'])
      .where('r.send_id', '=', sendId)
      .orderBy('r.address')
      .execute();
    return {
      ranges,
      rows: rows.map((r) => ({ ...r, contact_id: r.contact_id === null ? null : Number(r.contact_id) })),
      history,
    };
  }

  for (const [name, pick] of [
    ['two lists', () => [lists.a, lists.b]],
    ['All contacts', () => [lists.all]],
    ['one list', () => [lists.b]],
  ] as const) {
    it(`writes the same recipients in ranges as in one, from ${name}`, async () => {
      const whole = await expand(pick(), 1_000_000);
      const ranged = await expand(pick(), 4);
      assert.equal(whole.ranges, 1);
      assert.ok(ranged.ranges >= 8, `${ranged.ranges} ranges`);
      const byAddress = (rows: typeof whole.rows) => [...rows].sort((x, y) => x.address.localeCompare(y.address));
      assert.deepEqual(byAddress(ranged.rows), byAddress(whole.rows));
      assert.deepEqual(ranged.history, whole.history);
      // The request's recipients come first, and keep their own tags.
      assert.deepEqual(
        ranged.rows.slice(0, 2).map((r) => [r.address, r.tags]),
        [
          ['919800000025', '{"[x]":"own"}'],
          ['919899999999', null],
        ],
      );
    });
  }

  it(
    'takes the most recently updated contact of a number held twice, and settles consent and suppression per ' +
      'number',
    async () => {
      const { rows } = await expand([lists.a, lists.b], 3);
      const row = (address: string) => rows.find((r) => r.address === address)!;
      // Number 0 is held by contacts 1 (list A) and 31 (list B, updated later).
      assert.equal(row('919800000000').contact_id, 31);
      assert.equal(rows.filter((r) => r.address === '919800000000').length, 1);
      // Contact 4 (number 3) has no consent: the number is NotSent, though contact 34 with it has.
      assert.deepEqual([row('919800000003').status, row('919800000003').contact_id], ['NotSent', 34]);
      assert.match(row('919800000003').reason!, /no consent/);
      assert.deepEqual([row('919800000012').status, row('919800000012').reason], ['NotSent', 'suppressed: STOP']);
      // A request recipient takes the number's most recent contact too.
      assert.equal(row('919800000025').contact_id, 26);
      assert.equal(rows.length, 31);
    },
  );
});
