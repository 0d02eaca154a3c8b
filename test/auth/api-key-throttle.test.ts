import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import type { KyselyPlugin } from 'kysely';
import { forEachDatabase } from '../support/databases.ts';
import { bearer, startTestApp, type TestApp } from '../support/app.ts';
import { assertFailure } from '../support/client.ts';
import { MemoryCounterStore } from '../../src/ratelimit/counters.ts';
import { LOGIN_WINDOW_MS, MAX_KEY_FAILURES_PER_CLIENT } from '../../src/auth/throttle.ts';

const GUESSER = '198.51.100.7';
const OTHER = '203.0.113.20';

/** A well-shaped key no one holds: 43 base64url characters after hk_, one per i. */
const unknownKey = (i: number) => `hk_${String(i).padStart(43, 'A')}`;

forEachDatabase((dialect) => {
  let t: TestApp;
  let token: string;
  let statements: number;
  beforeEach(async () => {
    t = await startTestApp(dialect);
    token = await t.tokenFor(await t.createAccount());
    // Every statement the app runs from here, on either connection, reads or writes.
    statements = 0;
    const counting: KyselyPlugin = {
      transformQuery: ({ node }) => {
        statements += 1;
        return node;
      },
      transformResult: async ({ result }) => result,
    };
    t.ctx.db = t.ctx.db.withPlugin(counting);
    t.ctx.database.reads = t.ctx.database.reads.withPlugin(counting);
  });
  afterEach(() => t.close());

  async function keyFor(scopes: string[], expiresAt?: string): Promise<{ key: string; apiKeyId: string }> {
    const response = await t.app.inject({
      method: 'POST',
      url: '/api-keys',
      headers: bearer(token),
      payload: { name: 'sync', scopes, expiresAt },
    });
    assert.equal(response.statusCode, 201, response.body);
    return response.json();
  }
  const withKey = (key: string, remoteAddress = GUESSER) =>
    t.app.inject({ method: 'GET', url: '/account', headers: bearer(key), remoteAddress });
  /** The statements a request ran. */
  async function statementsOf<T = LightMyRequestResponse>(request: Promise<T>) {
    const before = statements;
    const response = await request;
    return { response, statements: statements - before };
  }

  it('holds keys sent at once to the same count: no more than the limit are looked up', async () => {
    const burst = await Promise.all(
      Array.from({ length: 2 * MAX_KEY_FAILURES_PER_CLIENT }, (_, i) => withKey(unknownKey(100 + i))),
    );
    const codes = burst.map((response) => response.statusCode);
    assert.equal(codes.filter((code) => code === 401).length, MAX_KEY_FAILURES_PER_CLIENT, codes.join(' '));
    assert.equal(codes.filter((code) => code === 429).length, MAX_KEY_FAILURES_PER_CLIENT);
  });

  it('takes a burst of one valid key, new or long unread, however many the client may fail', async () => {
    const { key } = await keyFor(['read']);
    const burst = async (bearerKey: string) => {
      const responses = await Promise.all(
        Array.from({ length: 3 * MAX_KEY_FAILURES_PER_CLIENT }, () => withKey(bearerKey)),
      );
      return [...new Set(responses.map((response) => response.statusCode))];
    };
    assert.deepEqual(await burst(key), [200], 'a key no request has brought yet');
    t.clock.advance(60_000);
    assert.deepEqual(await burst(key), [200], 'a key read a minute ago');
    t.clock.advance(LOGIN_WINDOW_MS);
    assert.deepEqual(await burst(key), [200], 'a key read longer ago than the throttle looks back');

    // The same unknown key in a burst is one guess looked up, each request a failure of the client.
    const looked = await statementsOf(burst(unknownKey(7)));
    assert.deepEqual(looked.response, [401]);
    assert.ok(looked.statements <= 2, `the lookups shared: ${looked.statements} statements`);
    assertFailure(await withKey(key), 429, /Too many invalid API keys/);
  });

  it('refuses a bearer not shaped as a key at once: no statement, and not counted', async () => {
    // What the other cases are measured against: a well-shaped unknown key is looked up.
    const looked = await statementsOf(withKey(unknownKey(0), OTHER));
    assertFailure(looked.response, 401, /revoked or never existed/);
    assert.ok(looked.statements > 0);

    const malformed = [
      'hk_',
      `hk_${'A'.repeat(42)}`,
      `hk_${'A'.repeat(44)}`,
      `hk_${'A'.repeat(42)}+`,
      `hk_${'A'.repeat(42)}=`,
      `hk_${'A'.repeat(41)}.A`,
    ];
    // More than the throttle's limit: were they counted, the well-shaped key after would be 429.
    for (let i = 0; i <= MAX_KEY_FAILURES_PER_CLIENT; i++) {
      const key = malformed[i % malformed.length];
      const refused = await statementsOf(withKey(key));
      assertFailure(refused.response, 401, /^The API key is not valid: it is not the shape of a key/);
      assert.equal(refused.response.headers['www-authenticate'], 'Bearer error="invalid_token"');
      assert.equal(refused.statements, 0, key);
    }
    assertFailure(await withKey(unknownKey(1)), 401, /revoked or never existed/);
  });

  it('refuses a client its keys after too many failures, unread, and no other client', async () => {
    const valid = await keyFor(['read']);
    const revoked = await keyFor(['read']);
    const expiring = await keyFor(['read'], new Date(t.clock.now() + 1000).toISOString());
    assert.equal((await withKey(valid.key)).statusCode, 200);
    assert.equal((await withKey(expiring.key)).statusCode, 200);
    const revoking = await t.app.inject({
      method: 'DELETE',
      url: `/api-keys/${revoked.apiKeyId}`,
      headers: bearer(token),
    });
    assert.equal(revoking.statusCode, 204);
    t.clock.advance(1000);

    // Unknown, revoked and expired keys all count; a scope refused (403) is no failure of the key.
    assertFailure(await withKey(revoked.key), 401, /revoked or never existed/);
    assertFailure(await withKey(expiring.key), 401, /expired/);
    const outOfScope = await t.app.inject({
      method: 'GET',
      url: '/audit',
      headers: bearer(valid.key),
      remoteAddress: GUESSER,
    });
    assert.equal(outOfScope.statusCode, 403);
    for (let i = 2; i < MAX_KEY_FAILURES_PER_CLIENT; i++) assert.equal((await withKey(unknownKey(i))).statusCode, 401);

    const throttled = await statementsOf(withKey(unknownKey(100)));
    assertFailure(throttled.response, 429, /Too many invalid API keys/);
    assert.equal(throttled.statements, 0, 'the key is not looked up');
    assert.equal(Number(throttled.response.headers['retry-after']), LOGIN_WINDOW_MS / 1000);
    // The throttle comes before the key, as at sign-in: the guesser's valid key waits too.
    assertFailure(await withKey(valid.key), 429, /Too many invalid API keys/);

    assertFailure(await withKey(unknownKey(100), OTHER), 401, /revoked or never existed/);
    const elsewhere = await withKey(valid.key, OTHER);
    assert.equal(elsewhere.statusCode, 200, elsewhere.body);
  });

  it('counts the addresses of one IPv6 /64 as one client', async () => {
    for (let i = 0; i < MAX_KEY_FAILURES_PER_CLIENT; i++) {
      assert.equal((await withKey(unknownKey(i), `2001:db8:1:2::${(i + 1).toString(16)}`)).statusCode, 401);
    }
    assert.equal((await withKey(unknownKey(0), '2001:db8:1:2:ffff::1')).statusCode, 429);
    assert.equal((await withKey(unknownKey(0), '2001:db8:1:3::1')).statusCode, 401, 'the next /64 is another client');
  });

  it("does not clear a client's failures when one of its keys works", async () => {
    const { key } = await keyFor(['read']);
    for (let i = 0; i < MAX_KEY_FAILURES_PER_CLIENT - 1; i++) {
      assert.equal((await withKey(unknownKey(i))).statusCode, 401);
      assert.equal((await withKey(key)).statusCode, 200);
    }
    assert.equal((await withKey(unknownKey(99))).statusCode, 401);
    assert.equal((await withKey(key)).statusCode, 429);
  });

  it('lets the client in again once its oldest failure is a window old', async () => {
    const { key } = await keyFor(['read']);
    assert.equal((await withKey(unknownKey(0))).statusCode, 401);
    t.clock.advance(60_000);
    for (let i = 1; i < MAX_KEY_FAILURES_PER_CLIENT; i++) assert.equal((await withKey(unknownKey(i))).statusCode, 401);
    const refused = await withKey(key);
    assert.equal(refused.statusCode, 429);
    assert.equal(Number(refused.headers['retry-after']), (LOGIN_WINDOW_MS - 60_000) / 1000);

    t.clock.advance(LOGIN_WINDOW_MS - 60_000 - 1);
    assert.equal((await withKey(key)).statusCode, 429, 'not a millisecond early');
    t.clock.advance(1);
    assert.equal((await withKey(key)).statusCode, 200, 'the first failure left the window');
    assert.equal((await withKey(unknownKey(50))).statusCode, 401);
    assert.equal((await withKey(key)).statusCode, 429, 'and the next failure fills it again');
    t.clock.advance(60_000);
    assert.equal((await withKey(key)).statusCode, 200);
  });
});

forEachDatabase((dialect) => {
  it('checks keys unthrottled while the counter store is unreachable', async () => {
    const down = new MemoryCounterStore();
    const t = await startTestApp(dialect, { counters: down });
    try {
      const token = await t.tokenFor(await t.createAccount());
      const created = await t.app.inject({
        method: 'POST',
        url: '/api-keys',
        headers: bearer(token),
        payload: { name: 'sync', scopes: ['account', 'read'] },
      });
      assert.equal(created.statusCode, 201, created.body);
      const { key } = created.json();
      const unreachable = () => Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:6379'));
      down.logEvent = unreachable;
      down.logEventUnlessFull = unreachable;
      down.forgetEvent = unreachable;
      down.recentEvents = unreachable;
      down.increment = unreachable;
      for (let i = 0; i < MAX_KEY_FAILURES_PER_CLIENT + 1; i++) {
        const refused = await t.app.inject({ method: 'GET', url: '/account', headers: bearer(unknownKey(i)) });
        assert.equal(refused.statusCode, 401, refused.body);
      }
      const ok = await t.app.inject({ method: 'GET', url: '/account', headers: bearer(key) });
      assert.equal(ok.statusCode, 200, ok.body);
    } finally {
      await t.close();
    }
  });
});
