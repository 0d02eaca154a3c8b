import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, it } from 'node:test';
import { createAccount } from '../../src/accounts/service.ts';
import { systemClock } from '../../src/clock.ts';
import { isUniqueViolation } from '../../src/db/errors.ts';
import { recordSmsGroup, sendJobKey, type PreparedSms } from '../../src/sms/accept.ts';
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
});
