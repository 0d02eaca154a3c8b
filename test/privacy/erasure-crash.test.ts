import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, it } from 'node:test';
import { start } from '../cli/support.ts';
import { accessToken, crashSetUp, killedAfter } from '../support/crash.ts';
import { createTestDatabase, forEachDatabase, type TestDatabase } from '../support/databases.ts';
import { waitFor } from '../support/wait.ts';

const NUMBER = '447911123456';
const SENDS = 1200; // more than two of the erasure's chunks of 500

// A serve killed (SIGKILL, a real process) halfway through an erasure, then a serve started
// again on the same database: the erasure completes, and nothing of the person is left.
forEachDatabase((dialect) => {
  let database: TestDatabase;
  beforeEach(async () => {
    database = await createTestDatabase(dialect);
  });
  afterEach(() => database.close());

  const heldInClear = async () =>
    Number(
      (
        await database.db
          .selectFrom('send_recipients')
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .where('address', '=', NUMBER)
          .executeTakeFirstOrThrow()
      ).n,
    );

  // Two serves' starts, 1,200 sends and an erasure in chunks: 50 s on PostgreSQL and past 60 s on SQLite (timed
  // out) beside other test files and busy loops; as the longest tests of sms/crash.test.ts, two minutes.
  it('completes an erasure killed halfway once a serve runs again', { timeout: 120_000 }, async () => {
    const setup = await crashSetUp(database, dialect, 2, (id) => ({
      email: null,
      mobile: id === 1 ? NUMBER : '447911000002',
      mobile_country_code: '44',
      mobile_opt_in: true,
      email_opt_in: false,
    }));
    const sendIds = Array.from({ length: SENDS }, () => randomUUID());
    for (let from = 0; from < SENDS; from += 400) {
      const ids = sendIds.slice(from, from + 400);
      await database.db
        .insertInto('sends')
        .values(
          ids.map((id, i) => ({
            id,
            account_id: setup.account.id,
            channel: 'sms' as const,
            status: 'Completed' as const,
            content: JSON.stringify({ kind: 'batch', senderName: 'HERALD', body: 'Hello' }),
            list_ids: '[]',
            webhook_url: null,
            scheduled_at: null,
            created_at: from + i,
            started_at: from + i,
            completed_at: from + i,
          })),
        )
        .execute();
      await database.db
        .insertInto('send_recipients')
        .values(
          ids.map((id, i) => ({
            send_id: id,
            address: NUMBER,
            contact_id: 1,
            tags: null,
            status: 'Delivered',
            reason: null,
            message_id: randomUUID(),
            parts: 1,
            encoding: 'GSM-7',
            error: null,
            updated_at: from + i,
          })),
        )
        .execute();
    }

    const erasureId = await killedAfter(
      { ...setup.env, HERALD_TEST_PAUSE_AT: 'privacy.erase.smsRecipients' },
      async (doomed) => {
        const response = await fetch(`${setup.base}/privacy/erasures`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${await accessToken(setup)}` },
          body: JSON.stringify({ mobile: NUMBER }),
        });
        assert.equal(response.status, 202);
        await doomed.logged('herald paused at privacy.erase.smsRecipients');
        return ((await response.json()) as { erasureId: string }).erasureId;
      },
    );
    const halfway = await database.db
      .selectFrom('erasures')
      .select(['status', 'messages', 'sealed_identifiers'])
      .where('id', '=', erasureId)
      .executeTakeFirstOrThrow();
    assert.equal(halfway.status, 'Processing');
    assert.equal(Number(halfway.messages), 500, 'one chunk of the recipients committed');
    assert.equal(await heldInClear(), SENDS - 500);
    assert.ok(halfway.sealed_identifiers?.startsWith('v1:'), 'the identifiers kept sealed meanwhile');

    const restarted = await start(['serve'], setup.env);
    try {
      await waitFor(
        'the erasure Completed after the restart',
        async () =>
          (await database.db.selectFrom('erasures').select('status').where('id', '=', erasureId).executeTakeFirst())
            ?.status === 'Completed' || undefined,
        { timeoutMs: 60_000 },
      );
    } finally {
      restarted.child.kill('SIGTERM');
      await new Promise((resolve) => restarted.child.once('exit', resolve));
    }
    const done = await database.db
      .selectFrom('erasures')
      .select(['contacts', 'messages', 'sealed_identifiers'])
      .where('id', '=', erasureId)
      .executeTakeFirstOrThrow();
    assert.deepEqual([Number(done.contacts), Number(done.messages), done.sealed_identifiers], [1, SENDS, null]);
    assert.equal(await heldInClear(), 0);
    const contacts = await database.db.selectFrom('contacts').select('mobile').execute();
    assert.deepEqual(
      contacts.map((c) => c.mobile),
      ['447911000002'],
    );
  });
});
