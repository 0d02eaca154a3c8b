import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { sql } from 'kysely';
import { createTestDatabase, forEachDatabase } from '../support/databases.ts';
import { ADMIN_TOKEN, bearer, startTestApp } from '../support/app.ts';
import { startApiTest, type ApiClient, type ApiTest } from '../support/client.ts';
import { buildBatch, sandboxEmails } from '../email/support.ts';

// DELETE /admin/accounts/{id}: everything the account sent goes with it, down to the rows
// written per message (which have no foreign keys on PostgreSQL), and nothing of another's.
forEachDatabase((dialect) => {
  let api: ApiTest;
  let alice: ApiClient;
  let bob: ApiClient;
  beforeEach(async () => {
    api = await startApiTest(dialect);
    alice = await api.client();
    bob = await api.client();
  });
  afterEach(() => api.close());

  /** One SMS batch of two messages and one email batch of one, sent through the sandbox. */
  async function sendSome(client: ApiClient): Promise<void> {
    await client.accept('/sms/batch', {
      senderName: 'HERALD',
      body: 'Hello from Herald',
      recipients: [{ mobileNo: '919812345678' }, { mobileNo: '919812345679' }],
    });
    await client.accept('/email/batch', buildBatch());
    await api.drain();
  }

  /** The account's rows in each table written per message. */
  async function messageRows(accountId: string): Promise<Record<string, number>> {
    const count = async (query: ReturnType<typeof sql<{ n: number }>>) =>
      Number((await query.execute(api.t.ctx.db)).rows[0].n);
    const recipients = sql`select r.id from send_recipients r join sends s on s.id = r.send_id
                            where s.account_id = ${accountId}`;
    return {
      sends: await count(sql`select count(*) as n from sends where account_id = ${accountId}`),
      send_recipients: await count(sql`select count(*) as n from (${recipients}) r`),
      recipient_history: await count(
        sql`select count(*) as n from recipient_history where recipient_id in (${recipients})`,
      ),
      sms_parts: await count(sql`select count(*) as n from sms_parts where recipient_id in (${recipients})`),
      sandbox_sms: await count(sql`select count(*) as n from sandbox_sms where account_id = ${accountId}`),
      sandbox_email: await count(sql`select count(*) as n from sandbox_email where account_id = ${accountId}`),
    };
  }

  /** Rows of any account's messages whose recipient or send is gone. */
  async function orphans(): Promise<number> {
    const { rows } = await sql<{ n: number }>`
      select (select count(*) from send_recipients r where not exists (select 1 from sends s where s.id = r.send_id))
           + (select count(*) from recipient_history h
               where not exists (select 1 from send_recipients r where r.id = h.recipient_id))
           + (select count(*) from sms_parts p
               where not exists (select 1 from send_recipients r where r.id = p.recipient_id))
           + (select count(*) from sandbox_sms b where not exists (select 1 from sends s where s.id = b.send_id))
           + (select count(*) from sandbox_email b
               where not exists (select 1 from sends s where s.id = b.send_id)) as n`.execute(api.t.ctx.db);
    return Number(rows[0].n);
  }

  it(
    'deletes the account with its sends, recipients, history, parts and sandbox copies, and leaves another ' +
      'account untouched',
    async () => {
      await sendSome(alice);
      await sendSome(bob);
      const before = {
        sends: 2,
        send_recipients: 3,
        recipient_history: 6,
        sms_parts: 2,
        sandbox_sms: 2,
        sandbox_email: 1,
      };
      assert.deepEqual(await messageRows(alice.account.row.id), before);
      assert.deepEqual(await messageRows(bob.account.row.id), before);

      const deleted = await api.t.app.inject({
        method: 'DELETE',
        url: `/admin/accounts/${alice.account.row.id}`,
        headers: bearer(ADMIN_TOKEN),
      });
      assert.equal(deleted.statusCode, 204, deleted.body);

      assert.deepEqual(await messageRows(alice.account.row.id), {
        sends: 0,
        send_recipients: 0,
        recipient_history: 0,
        sms_parts: 0,
        sandbox_sms: 0,
        sandbox_email: 0,
      });
      assert.equal(await orphans(), 0, 'no row of the deleted account is left behind');
      assert.deepEqual(await messageRows(bob.account.row.id), before);
      assert.equal((await sandboxEmails(bob)).length, 1, 'the other account still reads its sandbox');

      const again = await api.t.app.inject({
        method: 'DELETE',
        url: `/admin/accounts/${alice.account.row.id}`,
        headers: bearer(ADMIN_TOKEN),
      });
      assert.equal(again.statusCode, 404, again.body);
    },
  );
});

// Another process (or the admin API) deletes an account while this one still trusts its read of it.
forEachDatabase((dialect) => {
  it('answers 409, writing nothing, to requests of an account deleted after they were authenticated', async () => {
    const database = await createTestDatabase(dialect);
    const deleting = await startTestApp(dialect, { database });
    const trusting = await startTestApp(dialect, { database, clock: deleting.clock });
    try {
      const account = await deleting.createAccount();
      const token = await deleting.tokenFor(account);
      const post = (url: string, payload: object, idempotencyKey?: string) =>
        trusting.app.inject({
          method: 'POST',
          url,
          headers: { ...bearer(token), ...(idempotencyKey ? { 'idempotency-key': idempotencyKey } : {}) },
          payload,
        });
      // The account's read, trusted for a second (auth/access-cache.ts).
      assert.equal(
        (await trusting.app.inject({ method: 'GET', url: '/account', headers: bearer(token) })).statusCode,
        200,
      );
      const deleted = await deleting.app.inject({
        method: 'DELETE',
        url: `/admin/accounts/${account.row.id}`,
        headers: bearer(ADMIN_TOKEN),
      });
      assert.equal(deleted.statusCode, 204, deleted.body);

      const passcode = { recipient: '919812300001', senderName: 'HERALD', body: 'Your code is 1234' };
      for (const [url, payload, key] of [
        ['/sms/single', passcode, undefined],
        ['/sms/single', passcode, 'retry-1'],
        ['/lists', { name: 'Late' }, undefined],
        ['/contacts/batch', { createUpdateContacts: [{ email: 'ada@example.com' }] }, undefined],
        ['/verify', { to: '919812300001', channel: 'sms' }, undefined],
      ] as const) {
        const response = await post(url, payload, key);
        assert.equal(response.statusCode, 409, `${url}: ${response.body}`);
        assert.match(response.json().message, /was deleted while it ran; nothing was written/);
      }
      for (const table of ['sends', 'jobs', 'contact_lists', 'idempotency_keys', 'verifications'] as const) {
        const { rows } = await sql<{ n: number }>`select count(*) as n from ${sql.table(table)}`.execute(database.db);
        assert.equal(Number(rows[0].n), 0, table);
      }
    } finally {
      await trusting.close();
      await deleting.close();
      await database.close();
    }
  });
});
