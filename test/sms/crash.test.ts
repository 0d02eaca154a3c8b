import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { randomUUID } from 'node:crypto';
import { createAccount } from '../../src/accounts/service.ts';
import { systemClock } from '../../src/clock.ts';
import { createTestDatabase, forEachDatabase, type TestDatabase } from '../support/databases.ts';
import { freePort, serveKeyEnv, start } from '../cli/support.ts';
import { startSmsc } from '../../src/sim/smsc.ts';
import { waitFor } from '../support/wait.ts';

const LIST = 1200; // more than two pages of 500
/** The SMPP crash's batch, and SMS_TRANSPORT's defaults for smpp:// that bound what goes twice. */
const SMPP_LIST = 5000;
const SMPP_BINDS = 2;
const SMPP_WINDOW = 50;
const PASSWORD = 'correct horse battery staple';

// A worker killed (SIGKILL, a real process) at a named step of a send, then a serve started
// again on the same database: what every recipient got.
forEachDatabase((dialect) => {
  let database: TestDatabase;
  beforeEach(async () => {
    database = await createTestDatabase(dialect);
  });
  afterEach(() => database.close());

  /** An account with a list of `size` contacts, and the environment of a serve on the database. */
  async function setUp(size = LIST) {
    const account = await createAccount(database.db, systemClock, { userName: `crash-${randomUUID()}@example.com`, password: PASSWORD });
    const listId = randomUUID();
    await database.db.insertInto('contact_lists').values({ id: listId, account_id: account.id, name: 'Customers', name_key: 'customers', is_default: false, created_at: 0 }).execute();
    for (let from = 1; from <= size; from += 400) {
      const ids = Array.from({ length: Math.min(400, size - from + 1) }, (_, i) => from + i);
      await database.db
        .insertInto('contacts')
        .values(ids.map((id) => ({ id, account_id: account.id, email: null, mobile: String(919_800_000_000 + id), mobile_country_code: '91', mobile_opt_in: true, email_opt_in: false, properties: '{}', created_at: id, updated_at: id })))
        .execute();
      await database.db.insertInto('list_members').values(ids.map((id) => ({ list_id: listId, contact_id: id, added_at: id }))).execute();
    }
    const port = await freePort();
    const env = { DATABASE_URL: database.url, PORT: String(port), WORKER_PORT: String(await freePort()), JOB_LEASE_SECONDS: '1', ...serveKeyEnv(dialect) };
    return { account, listId, env, base: `http://127.0.0.1:${port}` };
  }

  /** Starts a serve paused at `step`, posts the request, and kills the serve (SIGKILL) once it has paused there; answers the QueueId. */
  async function killedAt(step: string, { account, env, base }: Awaited<ReturnType<typeof setUp>>, path: string, body: object): Promise<string> {
    const doomed = await start(['serve'], { ...env, HERALD_TEST_PAUSE_AT: step });
    try {
      const token = (await (await fetch(`${base}/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ userName: account.user_name, password: PASSWORD, privateToken: account.privateToken, validity: 'Default' }),
      })).json()).access_token as string;
      const accepted = await fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: JSON.stringify(body) });
      assert.equal(accepted.status, 202);
      const queueId = (await accepted.json()).data.QueueId as string;
      await doomed.logged(`herald paused at ${step}`);
      return queueId;
    } finally {
      doomed.child.kill('SIGKILL');
      await new Promise((resolve) => doomed.child.once('exit', resolve));
    }
  }

  /** Serves again until the send is Completed; answers how many times the sandbox took each recipient. */
  async function resumed(env: Record<string, string>, queueId: string): Promise<Map<string, number>> {
    const restarted = await start(['serve'], env);
    try {
      const deadline = Date.now() + 40_000;
      while ((await database.db.selectFrom('sends').select('status').where('id', '=', queueId).executeTakeFirstOrThrow()).status !== 'Completed') {
        assert.ok(Date.now() < deadline, 'the send was not completed after the restart');
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    } finally {
      restarted.child.kill('SIGTERM');
      await new Promise((resolve) => restarted.child.once('exit', resolve));
    }
    const taken = await database.db.selectFrom('sandbox_sms').select(['recipient']).where('send_id', '=', queueId).execute();
    const counts = new Map<string, number>();
    for (const { recipient } of taken) counts.set(recipient, (counts.get(recipient) ?? 0) + 1);
    return counts;
  }

  it('resumes a send killed mid-expansion: every recipient in the sandbox exactly once', { timeout: 60_000 }, async () => {
    const setup = await setUp();
    const queueId = await killedAt('sms.expand', setup, '/sms/batch', { listId: [setup.listId], recipients: [{ mobileNo: '919800000001' }, { mobileNo: '919700000001' }], senderName: 'HERALD', body: 'sale' });
    assert.equal(Number((await database.db.selectFrom('send_recipients').select((eb) => eb.fn.countAll<number>().as('n')).where('send_id', '=', queueId).executeTakeFirstOrThrow()).n), 2, 'only the request’s recipients: the expansion died with its transaction');

    const counts = await resumed(setup.env, queueId);
    assert.equal(counts.size, LIST + 1, 'every recipient: the list (one number shared with the request) and the other request recipient');
    assert.deepEqual([...new Set(counts.values())], [1], 'each exactly once');
  });

  it('sends again only the page whose submit was not recorded when its worker was killed: the documented bound', { timeout: 60_000 }, async () => {
    const setup = await setUp();
    const queueId = await killedAt('sms.submitted', setup, '/sms/batch', { listId: [setup.listId], senderName: 'HERALD', body: 'sale' });
    const counts = await resumed(setup.env, queueId);
    assert.equal(counts.size, LIST, 'every recipient');
    const twice = [...counts].filter(([, n]) => n > 1);
    assert.equal(twice.length, 500, 'the first page, submitted before the kill and not recorded, went twice; no other');
    assert.deepEqual([...new Set(counts.values())].sort(), [1, 2]);
    const read = await database.db.selectFrom('send_recipients').select('status').where('send_id', '=', queueId).execute();
    assert.deepEqual([...new Set(read.map((r) => r.status))], ['Delivered'], 'each recipient recorded once, at its last status');
  });

  it('sends a one-time passcode killed between its submit and its record once more, no more', { timeout: 60_000 }, async () => {
    const setup = await setUp();
    const queueId = await killedAt('sms.submitted', setup, '/sms/single', { recipient: '919812345678', senderName: 'HERALD', body: 'Your code is 482913' });
    const counts = await resumed(setup.env, queueId);
    assert.deepEqual([...counts], [['919812345678', 2]]);
    const [recipient] = await database.db.selectFrom('send_recipients').select('status').where('send_id', '=', queueId).execute();
    assert.equal(recipient.status, 'Delivered');
  });

  it('over SMPP, a worker killed mid-batch (no pause: SIGKILL while it submits) then restarted reaches every recipient, and sends again at most binds × window', { timeout: 120_000 }, async (t) => {
    const smsc = await startSmsc({ receiptDelayMs: 50 });
    try {
      const setup = await setUp(SMPP_LIST);
      const env = { ...setup.env, SMS_TRANSPORT: `smpp://herald:secret@127.0.0.1:${smsc.port}?binds=${SMPP_BINDS}&window=${SMPP_WINDOW}` };
      const doomed = await start(['serve'], env);
      let queueId: string;
      try {
        const token = (await (await fetch(`${setup.base}/token`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ userName: setup.account.user_name, password: PASSWORD, privateToken: setup.account.privateToken, validity: 'Default' }),
        })).json()).access_token as string;
        const accepted = await fetch(`${setup.base}/sms/batch`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: JSON.stringify({ listId: [setup.listId], senderName: 'HERALD', body: 'sale' }) });
        assert.equal(accepted.status, 202);
        queueId = (await accepted.json()).data.QueueId as string;
        await waitFor('a fifth of the batch at the SMSC', async () => smsc.stats().submits.accepted >= SMPP_LIST / 5 || undefined, { timeoutMs: 60_000 });
      } finally {
        doomed.child.kill('SIGKILL');
        await new Promise((resolve) => doomed.child.once('exit', resolve));
      }
      const atKill = smsc.stats().submits.accepted;
      assert.ok(atKill < SMPP_LIST, `killed mid-batch (${atKill} of ${SMPP_LIST} submitted)`);

      const restarted = await start(['serve'], env);
      try {
        await waitFor('the batch Completed after the restart', async () =>
          (await database.db.selectFrom('sends').select('status').where('id', '=', queueId).executeTakeFirstOrThrow()).status === 'Completed' || undefined, { timeoutMs: 60_000 });
      } finally {
        restarted.child.kill('SIGTERM');
        await new Promise((resolve) => restarted.child.once('exit', resolve));
      }
      const counts = new Map<string, number>();
      for (const message of smsc.received()) counts.set(message.recipient, (counts.get(message.recipient) ?? 0) + 1);
      const again = [...counts.values()].reduce((sum, n) => sum + n - 1, 0);
      t.diagnostic(`killed with ${atKill} of ${SMPP_LIST} submitted; sent a second time: ${again} (bound ${SMPP_BINDS * SMPP_WINDOW})`);
      assert.equal(counts.size, SMPP_LIST, 'every recipient reached');
      assert.ok(again <= SMPP_BINDS * SMPP_WINDOW, `${again} sent twice, at most binds × window (${SMPP_BINDS * SMPP_WINDOW})`);
      assert.deepEqual([...new Set(counts.values())].filter((n) => n > 2), [], 'none more than twice');
    } finally {
      await smsc.close();
    }
  });
});
