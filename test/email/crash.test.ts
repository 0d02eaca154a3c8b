import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { randomUUID } from 'node:crypto';
import { createAccount } from '../../src/accounts/service.ts';
import { systemClock } from '../../src/clock.ts';
import { createTestDatabase, forEachDatabase, type TestDatabase } from '../support/databases.ts';
import { freePort, serveKeyEnv, start } from '../cli/support.ts';
import { buildBatch } from './support.ts';

const LIST = 1200; // more than two pages of 500
const PASSWORD = 'correct horse battery staple';

// A serve killed (SIGKILL, a real process) while it expands an email batch, then a serve
// started again on the same database: what every recipient got.
forEachDatabase((dialect) => {
  let database: TestDatabase;
  beforeEach(async () => {
    database = await createTestDatabase(dialect);
  });
  afterEach(() => database.close());

  it('resumes a batch killed mid-expansion: every recipient in the sandbox exactly once', { timeout: 60_000 }, async () => {
    const account = await createAccount(database.db, systemClock, { userName: `crash-${randomUUID()}@example.com`, password: PASSWORD });
    const listId = randomUUID();
    await database.db.insertInto('contact_lists').values({ id: listId, account_id: account.id, name: 'Customers', name_key: 'customers', is_default: false, created_at: 0 }).execute();
    for (let from = 1; from <= LIST; from += 400) {
      const ids = Array.from({ length: Math.min(400, LIST - from + 1) }, (_, i) => from + i);
      await database.db
        .insertInto('contacts')
        .values(ids.map((id) => ({ id, account_id: account.id, email: `c${id}@example.com`, mobile: null, mobile_country_code: null, mobile_opt_in: false, email_opt_in: true, properties: '{}', created_at: id, updated_at: id })))
        .execute();
      await database.db.insertInto('list_members').values(ids.map((id) => ({ list_id: listId, contact_id: id, added_at: id }))).execute();
    }
    const port = await freePort();
    const env = { DATABASE_URL: database.url, PORT: String(port), WORKER_PORT: String(await freePort()), JOB_LEASE_SECONDS: '1', ...serveKeyEnv(dialect) };
    const base = `http://127.0.0.1:${port}`;

    const doomed = await start(['serve'], { ...env, HERALD_TEST_PAUSE_AT: 'email.expand' });
    let batchId: string;
    try {
      const token = (await (await fetch(`${base}/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ userName: account.user_name, password: PASSWORD, privateToken: account.privateToken, validity: 'Default' }),
      })).json()).access_token as string;
      // One request recipient is also on the list (in another case), one is not.
      const body = buildBatch({ listId: [listId] }, { recipients: [{ to: 'C1@example.com' }, { to: 'walk-in@example.com' }] });
      const accepted = await fetch(`${base}/email/batch`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: JSON.stringify(body) });
      assert.equal(accepted.status, 202);
      batchId = (await accepted.json()).data.BatchId as string;
      await doomed.logged('herald paused at email.expand');
    } finally {
      doomed.child.kill('SIGKILL');
      await new Promise((resolve) => doomed.child.once('exit', resolve));
    }
    const rows = await database.db.selectFrom('send_recipients').select((eb) => eb.fn.countAll<number>().as('n')).where('send_id', '=', batchId).executeTakeFirstOrThrow();
    assert.equal(Number(rows.n), 2, 'only the request’s recipients: the expansion died with its transaction');

    const restarted = await start(['serve'], env);
    try {
      const deadline = Date.now() + 40_000;
      while ((await database.db.selectFrom('sends').select('status').where('id', '=', batchId).executeTakeFirstOrThrow()).status !== 'Completed') {
        assert.ok(Date.now() < deadline, 'the batch was not completed after the restart');
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    } finally {
      restarted.child.kill('SIGTERM');
      await new Promise((resolve) => restarted.child.once('exit', resolve));
    }
    const taken = await database.db.selectFrom('sandbox_email').select('recipient').where('send_id', '=', batchId).execute();
    const counts = new Map<string, number>();
    for (const { recipient } of taken) counts.set(recipient, (counts.get(recipient) ?? 0) + 1);
    assert.equal(counts.size, LIST + 1, 'every recipient: the list (one address shared with the request) and the other request recipient');
    assert.deepEqual([...new Set(counts.values())], [1], 'each exactly once');
  });
});
