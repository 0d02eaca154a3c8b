import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { sql } from 'kysely';
import { ManualClock } from '../../src/clock.ts';
import { startApiTest, type ApiClient, type ApiTest } from '../support/client.ts';
import { forEachDatabase } from '../support/databases.ts';
import { waitForLockWait } from '../support/wait.ts';

// A passcode's accept is written in groups of its own (sms/accept.ts, recordSmsSingle): it
// never waits behind a group of campaigns being written.
forEachDatabase((dialect) => {
  let api: ApiTest;
  let alice: ApiClient;
  beforeEach(async () => {
    api = await startApiTest(dialect, { clock: new ManualClock(Date.now()) });
    alice = await api.client();
  });
  afterEach(() => api.close());

  it('answers a passcode while a campaign naming a list waits for that list', async () => {
    const listId = await alice.createList('Spring');
    const release = Promise.withResolvers<void>();
    // A DELETE of the list, holding it (PostgreSQL; SQLite's one writer would hold every write).
    const holding =
      dialect === 'postgres'
        ? api.t.ctx.db.transaction().execute(async (trx) => {
            await sql`select id from contact_lists where id = ${listId} for update`.execute(trx);
            await release.promise;
          })
        : Promise.resolve();
    let campaignSettled = false;
    const campaign = alice
      .post('/sms/batch', { senderName: 'HERALD', body: 'Spring sale', listId: [listId] })
      .finally(() => (campaignSettled = true));
    if (dialect === 'postgres') await waitForLockWait(api.t.ctx.db, 'the campaign to wait for its list', () => false);
    try {
      const passcode = await Promise.race([
        alice.post('/sms/single', { recipient: '919812300001', senderName: 'HERALD', body: 'Code 1' }),
        new Promise<never>((_, reject) => setTimeout(() => reject(new Error('no answer within 5 s')), 5000).unref()),
      ]);
      assert.equal(passcode.statusCode, 202, passcode.body);
      if (dialect === 'postgres') assert.equal(campaignSettled, false, 'answered while the campaign waits');
    } finally {
      release.resolve();
      await holding;
    }
    assert.equal((await campaign).statusCode, 202);
  });
});
