import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, it } from 'node:test';
import { createAccount } from '../../src/accounts/service.ts';
import { systemClock } from '../../src/clock.ts';
import { isUniqueViolation } from '../../src/db/errors.ts';
import { deleteList } from '../../src/messaging/deletions.ts';
import { recordSmsGroup, sendJobKey, writeSms, type PreparedSms } from '../../src/sms/accept.ts';
import { createTestDatabase, forEachDatabase, type TestDatabase } from '../support/databases.ts';

// Requests without an Idempotency-Key are written in groups (db/gathering.ts): what arrives
// while one group is written goes as the next, and one request a group cannot take fails alone.
forEachDatabase((dialect) => {
  let database: TestDatabase;
  beforeEach(async () => {
    database = await createTestDatabase(dialect);
  });
  afterEach(() => database.close());

  const passcode = (accountId: string, sendId: string, mobile: string): PreparedSms => ({
    sendId,
    accountId,
    draft: { kind: 'single', listIds: [], scheduledAt: null, webhookUrl: null },
    content: {
      kind: 'single',
      senderName: 'HERALD',
      body: 'Your code is 123456',
      tags: {},
      landingPageId: null,
      shortener: null,
    },
    recipients: [{ address: mobile, tags: null, contactId: null }],
    now: 1_000,
  });

  it('writes what arrives during a group as the next group, and commits its others when one is refused', async () => {
    const account = await createAccount(database.db, systemClock, {
      userName: `group-${randomUUID()}@example.com`,
      password: 'correct horse battery staple',
    });
    const taken = randomUUID();
    await database.gather(recordSmsGroup, passcode(account.id, taken, '919800000000'));

    const ids = Array.from({ length: 6 }, () => randomUUID());
    ids[3] = taken; // this one's send id is in the database already: its insert breaks the key
    const alone = database.gather(recordSmsGroup, passcode(account.id, randomUUID(), '919800000100'));
    const grouped = ids.map((id, i) => database.gather(recordSmsGroup, passcode(account.id, id, `91980000020${i}`)));
    const settled = await Promise.allSettled([alone, ...grouped]);

    assert.deepEqual(database.gathered().get('recordSmsGroup'), { groups: 3, callers: 8 }, 'one, one, then six');
    const refused = settled[4];
    assert.equal(refused.status, 'rejected');
    assert.ok(isUniqueViolation(refused.reason), String(refused.reason));
    const committed = [settled[0], ...settled.slice(1).filter((_, i) => i !== 3)];
    const queueIds = committed.map((result) => {
      assert.equal(result.status, 'fulfilled');
      assert.ok('statusCode' in result.value, JSON.stringify(result.value));
      assert.equal(result.value.statusCode, 202);
      return (result.value.body as { data: { QueueId: string } }).data.QueueId;
    });
    assert.deepEqual(queueIds.slice(1), [...ids.slice(0, 3), ...ids.slice(4)], 'each caller its own answer');

    const sends = await database.db.selectFrom('sends').select('id').where('id', 'in', queueIds).execute();
    assert.equal(sends.length, 6);
    const jobs = await database.db
      .selectFrom('jobs')
      .select('idempotency_key')
      .where('idempotency_key', 'in', queueIds.map(sendJobKey))
      .execute();
    assert.equal(jobs.length, 6);
    const recipients = await database.db
      .selectFrom('send_recipients')
      .select(['send_id', 'address'])
      .where('send_id', 'in', ids)
      .orderBy('address')
      .execute();
    assert.deepEqual(
      recipients.map((r) => [r.send_id, r.address]),
      [
        [ids[0], '919800000200'],
        [ids[1], '919800000201'],
        [ids[2], '919800000202'],
        [ids[4], '919800000204'],
        [ids[5], '919800000205'],
        [taken, '919800000000'],
      ].sort((a, b) => a[1].localeCompare(b[1])),
      'the refused request wrote nothing: the taken send keeps its own recipient',
    );
  });

  const newList = async (accountId: string) => {
    const id = randomUUID();
    await database.db
      .insertInto('contact_lists')
      .values({ id, account_id: accountId, name: id, name_key: id, created_at: 1_000 })
      .execute();
    return id;
  };
  const campaign = (accountId: string, listIds: string[]): PreparedSms => {
    const sms = passcode(accountId, randomUUID(), '919800000300');
    return { ...sms, draft: { kind: 'batch', listIds, scheduledAt: null, webhookUrl: null }, recipients: [] };
  };
  const deleted = (accountId: string, listId: string) =>
    database.call(deleteList, { accountId, listId, by: { actor: 'token', ip: null, at: 2_000 } }).then(
      () => 204,
      (error: { statusCode?: number }) => error.statusCode ?? error,
    );

  it("refuses a request whose list was deleted after its checks, and commits the group's others", async () => {
    const account = await createAccount(database.db, systemClock, {
      userName: `lists-${randomUUID()}@example.com`,
      password: 'correct horse battery staple',
    });
    const [kept, gone] = [await newList(account.id), await newList(account.id)];
    assert.equal(await deleted(account.id, gone), 204);

    const requests = [campaign(account.id, [kept]), campaign(account.id, [kept, gone]), campaign(account.id, [])];
    const answers = await Promise.all(requests.map((request) => database.gather(recordSmsGroup, request)));

    assert.deepEqual(
      database.gathered().get('recordSmsGroup'),
      { groups: 2, callers: 3 },
      'the first alone, then the refused one with the third',
    );
    const [first, refused, third] = answers;
    assert.ok('statusCode' in first && 'statusCode' in third);
    assert.deepEqual([first.statusCode, third.statusCode], [202, 202]);
    assert.ok('refused' in refused, JSON.stringify(refused));
    assert.equal(refused.refused.statusCode, 422);
    assert.deepEqual(refused.refused.errors, [
      { field: 'listId', message: `holds ${gone}, which is not a list of this account` },
    ]);
    const sends = await database.db
      .selectFrom('sends')
      .select('id')
      .where('account_id', '=', account.id)
      .orderBy('id')
      .execute();
    assert.deepEqual(sends.map((send) => send.id).sort(), [requests[0].sendId, requests[2].sendId].sort());
    const jobs = await database.db
      .selectFrom('jobs')
      .select('idempotency_key')
      .where('idempotency_key', '=', sendJobKey(requests[1].sendId))
      .execute();
    assert.deepEqual(jobs, [], 'the refused request queued nothing');
  });

  it("keeps another account's list from a request as unknown, though it exists", async () => {
    const [alice, bob] = await Promise.all(
      ['alice', 'bob'].map((name) =>
        createAccount(database.db, systemClock, {
          userName: `${name}-${randomUUID()}@example.com`,
          password: 'correct horse battery staple',
        }),
      ),
    );
    const bobs = await newList(bob.id);
    const answer = await database.gather(recordSmsGroup, campaign(alice.id, [bobs]));
    assert.ok('refused' in answer, JSON.stringify(answer));
    assert.equal(answer.refused.statusCode, 422);
  });

  it('holds the DELETE of a list while a send naming it is written, then answers 409', async () => {
    const account = await createAccount(database.db, systemClock, {
      userName: `hold-${randomUUID()}@example.com`,
      password: 'correct horse battery staple',
    });
    const list = await newList(account.id);
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let written = () => {};
    const hasWritten = new Promise<void>((resolve) => {
      written = resolve;
    });
    const request = campaign(account.id, [list]);
    const writing = database.db.transaction().execute(async (trx) => {
      const [answer] = await writeSms({ db: trx, dialect }, [request]);
      assert.ok('statusCode' in answer && answer.statusCode === 202, JSON.stringify(answer));
      written();
      await held;
    });
    await hasWritten;
    let settled = false;
    const deleting = deleted(account.id, list).finally(() => {
      settled = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    try {
      assert.equal(settled, false, 'the DELETE waits for the send being written');
    } finally {
      release();
      await writing;
    }
    assert.equal(await deleting, 409);
    const lists = await database.db.selectFrom('contact_lists').select('id').where('id', '=', list).execute();
    assert.equal(lists.length, 1, 'the list the send names is kept');
  });
});
