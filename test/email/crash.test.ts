import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { createTestDatabase, forEachDatabase, type TestDatabase } from '../support/databases.ts';
import { accepted, crashSetUp, killedAfter, servedUntilCompleted, tally } from '../support/crash.ts';
import { buildBatch } from './support.ts';

const LIST = 1200; // more than two pages of 500

// A serve killed (SIGKILL, a real process) while it expands an email batch, then a serve
// started again on the same database: what every recipient got.
forEachDatabase((dialect) => {
  let database: TestDatabase;
  beforeEach(async () => {
    database = await createTestDatabase(dialect);
  });
  afterEach(() => database.close());

  // Two serves start (20 to 40 s each with the machine loaded, where the suite runs two files at
  // once) and 1,201 messages go: 115 to 155 s seen so. The timeout only catches a hang.
  it('resumes a batch killed mid-expansion: every recipient in the sandbox exactly once', {
    timeout: 240_000,
  }, async () => {
    const setup = await crashSetUp(database, dialect, LIST, (id) => ({
      email: `c${id}@example.com`,
      mobile: null,
      mobile_country_code: null,
      mobile_opt_in: false,
      email_opt_in: true,
    }));
    const batchId = await killedAfter({ ...setup.env, HERALD_TEST_PAUSE_AT: 'email.expand' }, async (doomed) => {
      // One request recipient is also on the list (in another case), one is not.
      const body = buildBatch(
        { listId: [setup.listId] },
        { recipients: [{ to: 'C1@example.com' }, { to: 'walk-in@example.com' }] },
      );
      const { data } = await accepted(setup, '/email/batch', body);
      await doomed.logged('herald paused at email.expand');
      return data.BatchId;
    });
    const rows = await database.db
      .selectFrom('send_recipients')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('send_id', '=', batchId)
      .executeTakeFirstOrThrow();
    assert.equal(Number(rows.n), 2, 'only the request’s recipients: the expansion died with its transaction');

    await servedUntilCompleted(database, setup.env, batchId, 120_000);
    const counts = tally(
      (await database.db.selectFrom('sandbox_email').select('recipient').where('send_id', '=', batchId).execute()).map(
        (r) => r.recipient,
      ),
    );
    assert.equal(
      counts.size,
      LIST + 1,
      'every recipient: the list (one address shared with the request) and the other request recipient',
    );
    assert.deepEqual([...new Set(counts.values())], [1], 'each exactly once');
  });
});
