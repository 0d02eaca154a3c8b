import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { createTestDatabase, forEachDatabase } from '../support/databases.ts';
import { freePort, serveKeyEnv, start } from '../cli/support.ts';
import { bearer, startTestApp, type TestAccount, type TestApp } from '../support/app.ts';
import { foundInStorage, pgDump } from '../support/storage.ts';
import { assertFailure } from '../support/client.ts';
import { rotatePrivateToken, setPassword } from '../../src/accounts/service.ts';
import { ACCOUNT_TTL_MS } from '../../src/auth/access-cache.ts';
import { SCOPES, type Scope } from '../../src/auth/api-keys.ts';

/**
 * The contract's table of scopes (ARCHITECTURE.md, "Access and integration"), written out route by
 * route, with the choices where it is silent (docs/api-keys.md). `read` is every GET of an account
 * route but those listed in NOT_READ; routes in NO_KEY take no key at all.
 */
const TABLE: Record<Exclude<Scope, 'read'>, string[]> = {
  'sms:send': ['POST /sms/single', 'POST /sms/batch', 'DELETE /sms/{queueId}', 'POST /sandbox/sms/inbound'],
  'email:send': ['POST /email/batch', 'DELETE /email/batch/{batchId}'],
  'contacts:write': [
    'POST /contacts/batch',
    'PATCH /contacts/{contactId}',
    'DELETE /contacts/{contactId}',
    'POST /contacts/properties',
    'POST /lists',
    'PATCH /lists/{listId}',
    'DELETE /lists/{listId}',
    'POST /lists/{listId}/contacts',
    'DELETE /lists/{listId}/contacts/{contactId}',
    'POST /landing-pages',
    'POST /email/campaigns',
  ],
  suppressions: [
    'POST /sms/suppressions',
    'DELETE /sms/suppressions/{number}',
    'POST /email/suppressions',
    'DELETE /email/suppressions/{email}',
  ],
  verify: [
    'POST /verify',
    'POST /verify/{verificationId}/check',
    'POST /verify/{verificationId}/cancel',
    'GET /verify/stats',
    'GET /verify/{verificationId}',
  ],
  webhooks: [
    'GET /webhooks/secret',
    'POST /webhooks/secret/rotate',
    'GET /webhooks/deliveries',
    'GET /webhooks/deliveries/{id}',
    'POST /webhooks/deliveries/{id}/retry',
    'POST /webhooks/endpoints',
    'GET /webhooks/endpoints',
    'DELETE /webhooks/endpoints/{endpointId}',
  ],
  privacy: ['GET /privacy/export', 'POST /privacy/erasures', 'GET /privacy/erasures/{erasureId}'],
  account: ['PATCH /account', 'GET /audit'],
};
const NO_KEY = [
  'POST /api-keys',
  'GET /api-keys',
  'DELETE /api-keys/{apiKeyId}',
  'GET /console/session',
  'DELETE /console/session',
];
const NOT_READ = (route: string) => /^GET \/(webhooks\/secret|privacy\/|audit)/.test(route) || NO_KEY.includes(route);

interface Operation {
  route: string;
  method: string;
  path: string;
  scopes: string[] | undefined;
}

const UUID = '0b7e6c1e-8f4a-4d2b-9c3e-5a6f7b8c9d0e';

forEachDatabase((dialect) => {
  let t: TestApp;
  let account: TestAccount;
  let token: string;
  let logLines: string[];
  beforeEach(async () => {
    logLines = [];
    const stream = { write: (line: string) => logLines.push(line) };
    t = await startTestApp(dialect, { logger: { level: 'trace', stream } });
    account = await t.createAccount();
    token = await t.tokenFor(account);
  });
  afterEach(() => t.close());

  const create = (body: object, headers: Record<string, string> = bearer(token)) =>
    t.app.inject({ method: 'POST', url: '/api-keys', headers, payload: body });
  async function keyWith(scopes: readonly Scope[], as = token): Promise<{ key: string; apiKeyId: string }> {
    const response = await create({ name: `key for ${scopes.join(' ')}`, scopes }, bearer(as));
    assert.equal(response.statusCode, 201, response.body);
    return response.json();
  }
  const list = async (as = token) => {
    const response = await t.app.inject({ method: 'GET', url: '/api-keys', headers: bearer(as) });
    assert.equal(response.statusCode, 200, response.body);
    return response.json().apiKeys as Array<Record<string, unknown>>;
  };
  const revoke = (apiKeyId: string, as = token) =>
    t.app.inject({ method: 'DELETE', url: `/api-keys/${apiKeyId}`, headers: bearer(as) });
  const ownAccount = (key: string) => t.app.inject({ method: 'GET', url: '/account', headers: bearer(key) });

  it('creates a key shown once, lists it without the key, lets it in as its account, and revokes it', async () => {
    const response = await create({ name: 'CRM sync', scopes: ['read', 'contacts:write', 'read'] });
    assert.equal(response.statusCode, 201, response.body);
    const created = response.json();
    assert.deepEqual(Object.keys(created).sort(), ['apiKeyId', 'createdAt', 'expiresAt', 'key', 'name', 'scopes']);
    assert.match(created.key, /^hk_[A-Za-z0-9_-]{43}$/);
    assert.deepEqual(created.scopes, ['contacts:write', 'read']);
    assert.equal(created.createdAt, new Date(t.clock.now()).toISOString());
    assert.equal(created.expiresAt, null);

    const [listed] = await list();
    assert.deepEqual(listed, {
      apiKeyId: created.apiKeyId,
      name: 'CRM sync',
      scopes: ['contacts:write', 'read'],
      createdAt: created.createdAt,
      expiresAt: null,
      lastUsedAt: null,
    });

    const own = await ownAccount(created.key);
    assert.equal(own.statusCode, 200, own.body);
    assert.equal(own.json().userName, account.userName);
    assert.equal((await list())[0].lastUsedAt, new Date(t.clock.now()).toISOString());

    assert.equal((await revoke(created.apiKeyId)).statusCode, 204);
    // The very next request, at the same instant, with the key's read still fresh in the cache.
    assertFailure(await ownAccount(created.key), 401, /API key is not valid: it was revoked/);
    assert.deepEqual(await list(), []);
    assert.equal((await revoke(created.apiKeyId)).statusCode, 404);
  });

  it('refuses bad bodies: no scope, an unknown scope, an expiry in the past', async () => {
    assert.equal((await create({ name: 'x', scopes: [] })).statusCode, 400);
    assert.equal((await create({ name: 'x', scopes: ['admin'] })).statusCode, 400);
    const past = new Date(t.clock.now() - 1000).toISOString();
    assertFailure(await create({ name: 'x', scopes: ['read'], expiresAt: past }), 422, /future/);
    // RFC 3339 allows a leap second and an offset of hours alone; Date.parse reads neither.
    for (const expiresAt of ['2030-12-31T23:59:60Z', '2030-01-01T00:00:00+01']) {
      const refused = await create({ name: 'x', scopes: ['read'], expiresAt });
      assertFailure(refused, 400, /not valid/);
      assert.deepEqual(
        refused.json().errors.map((e: { field: string }) => e.field),
        ['expiresAt'],
      );
    }
    assert.deepEqual(await list(), []);
  });

  it('replays a create with its Idempotency-Key after the expiry it asked for has passed', async () => {
    const body = { name: 'short', scopes: ['read'], expiresAt: new Date(t.clock.now() + 60_000).toISOString() };
    const headers = { ...bearer(token), 'idempotency-key': 'create-1' };
    const first = await create(body, headers);
    assert.equal(first.statusCode, 201, first.body);
    t.clock.advance(10 * 60_000);
    const again = await create(body, headers);
    assert.equal(again.statusCode, 201, again.body);
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.equal(again.json().apiKeyId, first.json().apiKeyId);
  });

  it('writes lastUsedAt at most once a minute per key', async () => {
    const { key } = await keyWith(['read']);
    const start = t.clock.now();
    assert.equal((await ownAccount(key)).statusCode, 200);
    t.clock.advance(30_000);
    assert.equal((await ownAccount(key)).statusCode, 200);
    assert.equal((await list())[0].lastUsedAt, new Date(start).toISOString());
    t.clock.advance(30_000);
    assert.equal((await ownAccount(key)).statusCode, 200);
    assert.equal((await list())[0].lastUsedAt, new Date(start + 60_000).toISOString());
  });

  it('refuses an expired key on the next request', async () => {
    const expiresAt = new Date(t.clock.now() + 60_000).toISOString();
    const response = await create({ name: 'short', scopes: ['read'], expiresAt });
    assert.equal(response.json().expiresAt, expiresAt);
    const { key } = response.json();
    assert.equal((await ownAccount(key)).statusCode, 200);
    t.clock.advance(59_999);
    assert.equal((await ownAccount(key)).statusCode, 200);
    t.clock.advance(1);
    const refused = await ownAccount(key);
    assertFailure(refused, 401, /API key is not valid: it has expired/);
    assert.equal(refused.headers['www-authenticate'], 'Bearer error="invalid_token"');
  });

  it('refuses an unknown key as a revoked one', async () => {
    assertFailure(await ownAccount(`hk_${'A'.repeat(43)}`), 401, /revoked or never existed/);
  });

  it("keeps accounts apart: another account's key id is not found, and its key stays", async () => {
    const other = await t.createAccount();
    const otherToken = await t.tokenFor(other);
    const theirs = await keyWith(['read'], otherToken);
    assertFailure(await revoke(theirs.apiKeyId), 404, /API key was not found/);
    assert.deepEqual(await list(), []);
    assert.equal((await list(otherToken)).length, 1);
    const own = await ownAccount(theirs.key);
    assert.equal(own.json().userName, other.userName);
  });

  it('never lets a key manage keys, whatever its scopes', async () => {
    const { key, apiKeyId } = await keyWith(SCOPES);
    const headers = bearer(key);
    for (const response of [
      await create({ name: 'successor', scopes: ['read'] }, headers),
      await t.app.inject({ method: 'GET', url: '/api-keys', headers }),
      await t.app.inject({ method: 'DELETE', url: `/api-keys/${apiKeyId}`, headers }),
    ]) {
      assertFailure(response, 403, /API key cannot call this route/);
    }
    assert.equal((await list()).length, 1);
  });

  it('outlives a password change and a private-token rotation, which end access tokens', async () => {
    const { key } = await keyWith(['read']);
    await setPassword(t.ctx.db, t.clock, account.row.id, 'a new password altogether');
    await rotatePrivateToken(t.ctx.db, t.clock, account.row.id);
    t.clock.advance(ACCOUNT_TTL_MS);
    assert.equal((await ownAccount(token)).statusCode, 401);
    assert.equal((await ownAccount(key)).statusCode, 200);
  });

  it('asks the console for the password again to create a key', async () => {
    const signIn = await t.app.inject({
      method: 'POST',
      url: '/console/session',
      payload: { userName: account.userName, password: account.password, privateToken: account.privateToken },
    });
    const cookie = `herald_console=${signIn.cookies.find((c) => c.name === 'herald_console')!.value}`;
    const headers = { cookie, 'x-csrf-token': signIn.json().csrfToken };
    const body = { name: 'from the console', scopes: ['sms:send'] };
    assertFailure(await create(body, headers), 400, /password again/);
    assertFailure(await create({ ...body, password: 'not it' }, headers), 403, /password is incorrect/);
    const made = await create({ ...body, password: account.password }, headers);
    assert.equal(made.statusCode, 201, made.body);
    assert.match(made.json().key, /^hk_/);
    const listed = await t.app.inject({ method: 'GET', url: '/api-keys', headers: { cookie } });
    assert.equal(listed.json().apiKeys.length, 1);
    const revoked = await t.app.inject({ method: 'DELETE', url: `/api-keys/${made.json().apiKeyId}`, headers });
    assert.equal(revoked.statusCode, 204);
  });

  it('answers an Idempotency-Key replay with the same key id and without the key', async () => {
    const headers = { ...bearer(token), 'idempotency-key': 'make-the-key-once' };
    const body = { name: 'once', scopes: ['read'] };
    const first = await create(body, headers);
    assert.equal(first.statusCode, 201);
    const replay = await create(body, headers);
    assert.equal(replay.statusCode, 201);
    assert.equal(replay.headers['idempotent-replayed'], 'true');
    const { key, ...rest } = first.json();
    assert.deepEqual(replay.json(), rest);
    assert.equal((await list()).length, 1);
    assert.equal((await ownAccount(key)).statusCode, 200);
  });

  it('keeps the key out of the database and the logs', async () => {
    const headers = { ...bearer(token), 'idempotency-key': 'kept-out' };
    const { key } = (await create({ name: 'secret', scopes: ['read', 'sms:send'] }, headers)).json();
    assert.equal((await ownAccount(key)).statusCode, 200);
    await t.app.inject({ method: 'POST', url: '/sms/single', headers: bearer(key), payload: { nothing: true } });
    await t.app.inject({ method: 'GET', url: '/webhooks/secret', headers: bearer(key) });
    await t.app.inject({ method: 'GET', url: '/account', headers: bearer(`${key}x`) });
    assert.ok(logLines.length > 4, 'the requests were logged');
    // The key as a whole, and its random part alone (as a base64url decoder might write it back).
    const needles = [key, key.slice(3)];
    assert.deepEqual(await foundInStorage({ t }, dialect, needles), Object.fromEntries(needles.map((n) => [n, []])));
    if (dialect === 'postgres') {
      const dump = (await pgDump(t.database.url)).toString();
      assert.deepEqual(
        needles.filter((needle) => dump.includes(needle)),
        [],
        'a pg_dump holds no key',
      );
    }
    assert.deepEqual(
      needles.filter((needle) => logLines.some((line) => line.includes(needle))),
      [],
    );
  });

  it('stops a revoked key within a second in another process, at once in the revoking one', async () => {
    const other = await startTestApp(dialect, { database: t.database, clock: t.clock });
    try {
      const { key, apiKeyId } = await keyWith(['read']);
      const there = () => other.app.inject({ method: 'GET', url: '/account', headers: bearer(key) });
      assert.equal((await there()).statusCode, 200);
      assert.equal((await revoke(apiKeyId)).statusCode, 204);
      assert.equal((await ownAccount(key)).statusCode, 401);
      t.clock.advance(ACCOUNT_TTL_MS);
      assert.equal((await there()).statusCode, 401);
    } finally {
      await other.close();
    }
  });

  it('lets each scope call exactly its routes of the table, walking every OpenAPI operation', async () => {
    const document = t.app.swagger() as {
      paths: Record<string, Record<string, { security?: Array<Record<string, string[]>>; 'x-scope'?: string[] }>>;
      components: { securitySchemes: Record<string, Record<string, unknown>> };
    };
    assert.equal(document.components.securitySchemes.bearer.bearerFormat, 'JWT');
    assert.deepEqual(document.components.securitySchemes.apiKey['x-scopes'], [...SCOPES]);
    const operations: Operation[] = Object.entries(document.paths).flatMap(([path, methods]) =>
      Object.entries(methods).map(([method, op]) => ({
        route: `${method.toUpperCase()} ${path}`,
        method: method.toUpperCase(),
        path,
        scopes: op['x-scope'],
      })),
    );
    const accountRoutes = operations.filter((op) => op.scopes !== undefined);
    const expected = (op: Operation): string[] => {
      const scopes = Object.entries(TABLE)
        .filter(([, routes]) => routes.includes(op.route))
        .map(([scope]) => scope);
      if (op.method === 'GET' && !NOT_READ(op.route)) scopes.push('read');
      return SCOPES.filter((scope) => scopes.includes(scope));
    };
    // Every route of the table is in the document, and every account route is somewhere in the table.
    const known = new Set(accountRoutes.map((op) => op.route));
    assert.deepEqual(
      [...Object.values(TABLE).flat(), ...NO_KEY].filter((route) => !known.has(route)),
      [],
    );
    assert.deepEqual(
      accountRoutes.filter((op) => expected(op).length === 0 && !NO_KEY.includes(op.route)).map((op) => op.route),
      [],
    );
    assert.deepEqual(
      accountRoutes
        .filter((op) => String(op.scopes!.toSorted()) !== String(expected(op).toSorted()))
        .map((op) => op.route),
      [],
    );

    const wrong: string[] = [];
    for (const scope of SCOPES) {
      const { key } = await keyWith([scope]);
      for (const op of accountRoutes) {
        const url = op.path.replace(/\{[^}]+\}/g, UUID);
        const response = await t.app.inject({ method: op.method as 'GET', url, headers: bearer(key) });
        const allowed = expected(op).includes(scope);
        const refused = response.statusCode === 403;
        if (allowed === refused || response.statusCode === 401 || response.statusCode >= 500) {
          wrong.push(`${scope} ${op.route}: ${response.statusCode} ${response.body.slice(0, 100)}`);
        }
        if (refused) assert.match(response.json().message, /API key/);
      }
    }
    assert.deepEqual(wrong, []);
  });
});

describe('postgres, two API processes', () => {
  it('refuses a key revoked in one process within a second in a `herald serve` beside it', {
    timeout: 60_000,
  }, async () => {
    const database = await createTestDatabase('postgres');
    const env = serveKeyEnv('postgres');
    const t = await startTestApp('postgres', { database, env });
    const port = await freePort();
    const serve = await start(['serve'], { ...env, DATABASE_URL: database.url, PORT: String(port) });
    try {
      const account = await t.createAccount();
      const token = await t.tokenFor(account);
      const made = await t.app.inject({
        method: 'POST',
        url: '/api-keys',
        headers: bearer(token),
        payload: { name: 'elsewhere', scopes: ['read'] },
      });
      const { key, apiKeyId } = made.json();
      const there = () => fetch(`http://127.0.0.1:${port}/account`, { headers: bearer(key) });
      assert.equal((await there()).status, 200);
      // The serve read the key before it answered: it may trust that read for ACCOUNT_TTL_MS, no longer.
      const readBy = performance.now();
      const revoked = await t.app.inject({ method: 'DELETE', url: `/api-keys/${apiKeyId}`, headers: bearer(token) });
      assert.equal(revoked.statusCode, 204);
      for (;;) {
        const sentAt = performance.now();
        const response = await there();
        if (response.status === 401) break;
        assert.equal(response.status, 200);
        const after = Math.round(sentAt - readBy);
        assert.ok(after < ACCOUNT_TTL_MS, `let in a request sent ${after} ms after the serve read the revoked key`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      assert.ok(!serve.output().includes(key.slice(3)), 'the key is not in the log of the serve');
    } finally {
      serve.child.kill('SIGTERM');
      await new Promise((resolve) => serve.child.once('exit', resolve));
      await t.close();
      await database.close();
    }
  });
});
