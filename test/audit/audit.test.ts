import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import { recordAudit } from '../../src/audit/entries.ts';
import { erasedAddress, erasureKey } from '../../src/messaging/erased-identifiers.ts';
import { sweep } from '../../src/messaging/retention.ts';
import { ADMIN_TOKEN, bearer } from '../support/app.ts';
import { forEachDatabase } from '../support/databases.ts';
import { buildContact, startApiTest, type ApiClient, type ApiTest } from '../support/client.ts';

// The audit log (ARCHITECTURE.md, "Access and integration"; docs/audit.md): GET /audit.

interface Entry {
  at: string;
  actor: string;
  action: string;
  target: string | null;
  ip: string | null;
}

const DAY = 24 * 60 * 60_000;
const IP = '127.0.0.1';
const NUMBER = '447911123456';
const EMAIL = 'ada@example.com';

forEachDatabase((dialect) => {
  let api: ApiTest;
  let alice: ApiClient;
  beforeEach(async () => {
    api = await startApiTest(dialect, {
      clock: new ManualClock(Date.UTC(2026, 2, 10, 12)),
      env: { SMS_TRANSPORT: 'sandbox:', EMAIL_TRANSPORT: 'sandbox:' },
    });
    alice = await api.client();
  });
  afterEach(() => api.close());

  type Method = 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE';
  const call = (token: string, method: Method, url: string, payload?: object) =>
    api.t.app.inject({ method, url, headers: bearer(token), ...(payload ? { payload } : {}) });
  /** Answers the call's response after checking its status. */
  async function expect(status: number, token: string, method: Method, url: string, payload?: object) {
    const response = await call(token, method, url, payload);
    assert.equal(response.statusCode, status, `${method} ${url}: ${response.body}`);
    return response;
  }
  async function page(token = alice.token, query = '') {
    const response = await call(token, 'GET', `/audit${query}`);
    assert.equal(response.statusCode, 200, response.body);
    return response.json() as { entries: Entry[]; nextCursor: string | null };
  }
  const entries = async (token = alice.token) => (await page(token)).entries;
  const hashOf = async (identifier: string) =>
    erasedAddress(await erasureKey(api.t.ctx.db, api.t.ctx.encryptionKey), identifier);

  it('records every change an access token makes, newest first, with its target and address', async () => {
    const at = new Date(api.clock.now()).toISOString();
    const [contactId] = (await alice.upsert([buildContact({ email: 'grace@example.com' })])).inserted.contactIds;
    const listId = await alice.createList('Newsletter');
    assert.deepEqual(await entries(), [], 'making contacts and lists is not audited');

    const key = (await expect(201, alice.token, 'POST', '/api-keys', { name: 'CRM', scopes: ['read'] })).json();
    await expect(204, alice.token, 'DELETE', `/api-keys/${key.apiKeyId}`);
    await expect(200, alice.token, 'POST', '/webhooks/secret/rotate');
    const endpoint = (
      await expect(201, alice.token, 'POST', '/webhooks/endpoints', {
        url: 'http://127.0.0.1:9/hooks',
        events: ['sms.status'],
      })
    ).json();
    await expect(204, alice.token, 'DELETE', `/webhooks/endpoints/${endpoint.endpointId}`);
    await expect(404, alice.token, 'DELETE', `/webhooks/endpoints/${endpoint.endpointId}`);
    await expect(201, alice.token, 'POST', '/sms/suppressions', { number: NUMBER });
    await expect(204, alice.token, 'DELETE', `/sms/suppressions/${NUMBER}`);
    await expect(201, alice.token, 'POST', '/email/suppressions', { email: EMAIL });
    await expect(204, alice.token, 'DELETE', `/email/suppressions/${EMAIL}`);
    await expect(200, alice.token, 'PATCH', '/account', { locale: 'en-GB' });
    await expect(204, alice.token, 'DELETE', `/contacts/${contactId}`);
    await expect(204, alice.token, 'DELETE', `/lists/${listId}`);
    const { erasureId } = (
      await expect(202, alice.token, 'POST', '/privacy/erasures', { mobile: '447700900123' })
    ).json();

    const number = await hashOf(NUMBER);
    const email = await hashOf(EMAIL);
    const expected: Array<[string, string | null]> = [
      ['apiKey.created', key.apiKeyId],
      ['apiKey.revoked', key.apiKeyId],
      ['webhookSecret.rotated', null],
      ['webhookEndpoint.created', endpoint.endpointId],
      ['webhookEndpoint.deleted', endpoint.endpointId],
      ['suppression.added', number],
      ['suppression.removed', number],
      ['suppression.added', email],
      ['suppression.removed', email],
      ['account.updated', null],
      ['contact.deleted', String(contactId)],
      ['list.deleted', listId],
      ['erasure.requested', erasureId],
    ];
    const found = await page();
    assert.equal(found.nextCursor, null);
    assert.deepEqual(
      found.entries,
      expected.reverse().map(([action, target]) => ({ at, actor: 'token', action, target, ip: IP })),
    );
    const body = JSON.stringify(found);
    for (const identifier of [NUMBER, EMAIL]) assert.ok(!body.includes(identifier), `${identifier} is only a hash`);
    assert.match(number, /^erased:[0-9a-f]{64}$/);
  });

  it('names the API key, the console session and the operator as their actors', async () => {
    const created = await expect(201, alice.token, 'POST', '/api-keys', {
      name: 'ops',
      scopes: ['suppressions', 'account'],
    });
    const { key, apiKeyId } = created.json();
    await expect(201, key, 'POST', '/sms/suppressions', { number: NUMBER });

    const signIn = await api.t.app.inject({
      method: 'POST',
      url: '/console/session',
      payload: {
        userName: alice.account.userName,
        password: alice.account.password,
        privateToken: alice.account.privateToken,
      },
    });
    assert.equal(signIn.statusCode, 200, signIn.body);
    const cookie = `herald_console=${signIn.cookies.find((c) => c.name === 'herald_console')?.value}`;
    const patched = await api.t.app.inject({
      method: 'PATCH',
      url: '/account',
      headers: { cookie, 'x-csrf-token': signIn.json().csrfToken },
      payload: { smartEncoding: true },
    });
    assert.equal(patched.statusCode, 200, patched.body);

    const accountId = alice.account.row.id;
    await expect(200, ADMIN_TOKEN, 'PATCH', `/admin/accounts/${accountId}`, { locale: 'fr' });
    await expect(200, ADMIN_TOKEN, 'POST', `/admin/accounts/${accountId}/rotate-private-token`);
    await expect(200, ADMIN_TOKEN, 'PUT', `/admin/accounts/${accountId}/password`, { password: 'a new long password' });

    // The key may read the log (scope `account`), though the operator's changes ended the token.
    const actions = (await entries(key)).map((e) => [e.actor, e.action]);
    assert.deepEqual(actions, [
      ['admin', 'account.password.changed'],
      ['admin', 'account.privateToken.rotated'],
      ['admin', 'account.updated'],
      ['console', 'account.updated'],
      [`apiKey:${apiKeyId}`, 'suppression.added'],
      ['token', 'apiKey.created'],
    ]);

    const made = await expect(201, ADMIN_TOKEN, 'POST', '/admin/accounts', {
      userName: `audit-${process.pid}-${dialect}@example.com`,
      password: 'correct horse battery staple',
    });
    const account = made.json();
    const { userName, privateToken } = account;
    const issued = await api.t.app.inject({
      method: 'POST',
      url: '/token',
      payload: { userName, privateToken, password: 'correct horse battery staple', validity: 'Default' },
    });
    assert.equal(issued.statusCode, 200, issued.body);
    const token = issued.json().access_token as string;
    assert.deepEqual(
      (await entries(token)).map((e) => [e.actor, e.action, e.target, e.ip]),
      [['admin', 'account.created', null, IP]],
    );
  });

  it('records the operator’s changes to an account’s senders, not the service domain’s keys', async () => {
    const bob = await api.client();
    const admin = `/admin/accounts/${alice.account.row.id}`;
    for (let i = 0; i < 2; i++) {
      await expect(201, ADMIN_TOKEN, 'POST', `${admin}/sender-names`, { name: 'ACME' });
      await expect(201, ADMIN_TOKEN, 'POST', `${admin}/sender-domains`, { domain: 'mail.example.org' });
    }
    const first = (await call(ADMIN_TOKEN, 'GET', `${admin}/sender-domains`)).json().senderDomains[0].dkim;
    const domain = `${admin}/sender-domains/mail.example.org`;
    const rotated = (await expect(201, ADMIN_TOKEN, 'POST', `${domain}/dkim-rotations`)).json().dkim;
    await expect(409, ADMIN_TOKEN, 'DELETE', `${domain}/dkim-keys/${rotated.selector}`);
    await expect(204, ADMIN_TOKEN, 'DELETE', `${domain}/dkim-keys/${first.selector}`);
    await expect(201, ADMIN_TOKEN, 'POST', '/admin/dkim/rotations');

    assert.deepEqual(
      (await entries()).map((e) => [e.actor, e.action, e.target, e.ip]),
      [
        ['admin', 'dkimKey.removed', first.recordName, IP],
        ['admin', 'dkimKey.rotated', rotated.recordName, IP],
        ['admin', 'senderDomain.added', 'mail.example.org', IP],
        ['admin', 'senderName.added', 'ACME', IP],
      ],
    );
    assert.deepEqual(await entries(bob.token), [], 'another account’s log holds none of them');
  });

  it('writes no entry for a change that fails', async () => {
    const other = await api.client();
    const [theirs] = (await other.upsert([buildContact({ email: 'bob@example.com' })])).inserted.contactIds;
    const allContacts = (await alice.get('/lists')).json().lists[0].listId;
    await expect(404, alice.token, 'DELETE', `/contacts/${theirs + 1000}`);
    await expect(404, alice.token, 'DELETE', '/lists/0b7e6c1e-8f4a-4d2b-9c3e-5a6f7b8c9d0e');
    await expect(409, alice.token, 'DELETE', `/lists/${allContacts}`);
    await expect(404, alice.token, 'DELETE', '/api-keys/0b7e6c1e-8f4a-4d2b-9c3e-5a6f7b8c9d0e');
    await expect(404, alice.token, 'DELETE', `/sms/suppressions/${NUMBER}`);
    await expect(404, alice.token, 'DELETE', `/email/suppressions/${EMAIL}`);
    await expect(400, alice.token, 'PATCH', '/account', { locale: 'not a locale!' });
    await expect(404, ADMIN_TOKEN, 'PUT', '/admin/accounts/0b7e6c1e-8f4a-4d2b-9c3e-5a6f7b8c9d0e/password', {
      password: 'a new long password',
    });
    // Suppressing an address twice changes nothing the second time.
    await expect(201, alice.token, 'POST', '/sms/suppressions', { number: NUMBER });
    await expect(201, alice.token, 'POST', '/sms/suppressions', { number: NUMBER });
    assert.deepEqual(
      (await entries()).map((e) => e.action),
      ['suppression.added'],
    );
  });

  it('keeps accounts apart, pages newest first, and refuses a cursor it never gave', async () => {
    const bob = await api.client();
    for (let i = 0; i < 5; i++) {
      await expect(200, alice.token, 'PATCH', '/account', { locale: i % 2 ? 'en' : 'fr' });
      api.clock.advance(1000);
    }
    assert.deepEqual(await entries(bob.token), [], "another account sees none of alice's entries");
    await expect(200, bob.token, 'PATCH', '/account', { locale: 'de' });
    assert.equal((await entries(bob.token)).length, 1);

    const seen: string[] = [];
    let query = '?limit=2';
    for (;;) {
      const { entries: shown, nextCursor } = await page(alice.token, query);
      assert.ok(shown.length <= 2);
      seen.push(...shown.map((e) => e.at));
      if (nextCursor === null) break;
      query = `?limit=2&cursor=${nextCursor}`;
    }
    const start = Date.UTC(2026, 2, 10, 12);
    assert.deepEqual(
      seen,
      [4, 3, 2, 1, 0].map((i) => new Date(start + i * 1000).toISOString()),
    );
    assert.equal((await call(alice.token, 'GET', '/audit?cursor=nonsense')).statusCode, 400);
    assert.equal((await call(alice.token, 'GET', '/audit?limit=101')).statusCode, 400);
  });

  it('refuses a key without the account scope', async () => {
    const { key } = (await expect(201, alice.token, 'POST', '/api-keys', { name: 'r', scopes: ['read'] })).json();
    assert.equal((await call(key, 'GET', '/audit')).statusCode, 403);
  });

  it('lets entries go after AUDIT_RETENTION_DAYS, in chunks', async () => {
    const now = api.clock.now();
    const accountId = alice.account.row.id;
    const { db } = api.t.ctx;
    const write = (at: number) =>
      recordAudit(db, { accountId, actor: 'token', action: 'account.updated', target: null, ip: IP, at });
    for (let i = 0; i < 5; i++) await write(now - 400 * DAY - i);
    await write(now - 364 * DAY);
    const report = await sweep(api.t.ctx.database, now, 30, {
      auditRetentionDays: 365,
      limits: { sends: 1000, rows: 2 },
    });
    assert.equal(report.auditEntries, 5);
    const left = await entries();
    assert.deepEqual(
      left.map((e) => e.at),
      [new Date(now - 364 * DAY).toISOString()],
    );
    const untouched = await sweep(api.t.ctx.database, now, 30);
    assert.equal(untouched.auditEntries, 0, 'without AUDIT_RETENTION_DAYS the sweep leaves the log alone');
    assert.equal(api.t.ctx.config.auditRetentionDays, 365);
  });
});
