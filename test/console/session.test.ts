import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { forEachDatabase } from '../support/databases.ts';
import { ADMIN_TOKEN, bearer, startTestApp, type TestAccount, type TestApp } from '../support/app.ts';
import { SESSION_TTL_MS } from '../../src/auth/console-sessions.ts';

// The console's sign-in: a session in an HttpOnly, SameSite=Strict cookie that the account
// routes take in place of a bearer token, with a CSRF token on every change.
forEachDatabase((dialect) => {
  let t: TestApp;
  let account: TestAccount;
  beforeEach(async () => {
    t = await startTestApp(dialect);
    account = await t.createAccount();
  });
  afterEach(() => t.close());

  const signIn = (overrides: Record<string, string> = {}) =>
    t.app.inject({
      method: 'POST',
      url: '/console/session',
      payload: {
        userName: account.userName,
        password: account.password,
        privateToken: account.privateToken,
        ...overrides,
      },
    });

  /** The cookie header a browser would send back, and the CSRF token, of a sign-in. */
  async function session(): Promise<{ cookie: string; csrf: string }> {
    const response = await signIn();
    assert.equal(response.statusCode, 200, response.body);
    const set = response.cookies.find((c) => c.name === 'herald_console');
    assert.ok(set, 'the sign-in sets the session cookie');
    return { cookie: `herald_console=${set.value}`, csrf: response.json().csrfToken };
  }

  const as = (
    cookie: string,
    method: 'GET' | 'POST' | 'DELETE',
    url: string,
    headers: Record<string, string> = {},
    payload?: object,
  ): Promise<LightMyRequestResponse> =>
    t.app.inject({ method, url, headers: { cookie, ...headers }, ...(payload ? { payload } : {}) });

  it(
    'signs in with the /token credentials into an HttpOnly, SameSite=Strict cookie, not Secure over http, and ' +
      'reads the account under it',
    async () => {
      const response = await signIn();
      assert.equal(response.statusCode, 200, response.body);
      const body = response.json();
      assert.deepEqual(Object.keys(body).sort(), ['csrfToken', 'locale', 'timeZoneOffset', 'userName']);
      assert.equal(body.userName, account.userName);
      const setCookie = String(response.headers['set-cookie']);
      assert.match(setCookie, /^herald_console=[A-Za-z0-9_-]{43};/);
      assert.match(setCookie, /; HttpOnly/);
      assert.match(setCookie, /; SameSite=Strict/);
      assert.match(setCookie, /; Path=\//);
      assert.match(setCookie, new RegExp(`; Max-Age=${SESSION_TTL_MS / 1000}`));
      assert.doesNotMatch(setCookie, /Secure/);
      assert.ok(!response.body.includes(setCookie.split(';')[0].split('=')[1]), 'the secret is in the cookie only');

      const cookie = setCookie.split(';')[0];
      const read = await as(cookie, 'GET', '/account');
      assert.equal(read.statusCode, 200, read.body);
      assert.equal(read.json().userName, account.userName);
      const again = await as(cookie, 'GET', '/console/session');
      assert.equal(again.statusCode, 200);
      assert.equal(again.json().csrfToken, body.csrfToken);
    },
  );

  it('marks the cookie Secure when PUBLIC_URL is https', async () => {
    await t.close();
    t = await startTestApp(dialect, { env: { PUBLIC_URL: 'https://herald.example' } });
    account = await t.createAccount();
    const response = await signIn();
    assert.equal(response.statusCode, 200, response.body);
    assert.match(String(response.headers['set-cookie']), /; Secure/);
  });

  it(
    'refuses wrong credentials with 401 and no cookie, and ' + 'counts them with /token against the same throttle',
    async () => {
      const wrong = await signIn({ password: 'not the password' });
      assert.equal(wrong.statusCode, 401);
      assert.equal(wrong.json().status, 'Failure');
      assert.equal(wrong.headers['set-cookie'], undefined);
      for (let i = 0; i < 4; i++) {
        const viaToken = await t.app.inject({
          method: 'POST',
          url: '/token',
          payload: {
            userName: account.userName,
            password: 'nope',
            privateToken: account.privateToken,
            validity: 'Default',
          },
        });
        assert.equal(viaToken.statusCode, 401);
      }
      const throttled = await signIn();
      assert.equal(throttled.statusCode, 429, 'five failures, at either door, close both');
      assert.ok(Number(throttled.headers['retry-after']) > 0);
    },
  );

  it(
    "refuses a change made under the cookie without the CSRF token, or with another session's, and takes it with " +
      'its own',
    async () => {
      const mine = await session();
      const other = await session();
      const missing = await as(mine.cookie, 'POST', '/lists', {}, { name: 'Customers' });
      assert.equal(missing.statusCode, 403, missing.body);
      assert.equal(missing.json().status, 'Failure');
      const foreign = await as(mine.cookie, 'POST', '/lists', { 'x-csrf-token': other.csrf }, { name: 'Customers' });
      assert.equal(foreign.statusCode, 403);
      const lists = await as(mine.cookie, 'GET', '/lists');
      assert.deepEqual(
        lists.json().lists.map((l: { name: string }) => l.name),
        ['All contacts'],
        'nothing refused was written',
      );
      const made = await as(mine.cookie, 'POST', '/lists', { 'x-csrf-token': mine.csrf }, { name: 'Customers' });
      assert.equal(made.statusCode, 201, made.body);
      // A bearer token needs no CSRF token: no browser sends it by itself.
      const viaToken = await t.app.inject({
        method: 'POST',
        url: '/lists',
        headers: bearer(await t.tokenFor(account)),
        payload: { name: 'Prospects' },
      });
      assert.equal(viaToken.statusCode, 201);
    },
  );

  it('keeps the session’s and account’s reads out of every cache, and clears the browser’s at sign-out', async () => {
    const signedIn = await signIn();
    assert.equal(signedIn.headers['cache-control'], 'no-store', 'the CSRF token');
    const { cookie, csrf } = await session();
    for (const url of ['/console/session', '/webhooks/secret', '/account', '/api-keys'])
      assert.equal((await as(cookie, 'GET', url)).headers['cache-control'], 'no-store', url);
    const admin = await t.app.inject({ method: 'GET', url: '/admin/accounts', headers: bearer(ADMIN_TOKEN) });
    assert.equal(admin.headers['cache-control'], 'no-store');
    const out = await as(cookie, 'DELETE', '/console/session', { 'x-csrf-token': csrf });
    assert.equal(out.headers['clear-site-data'], '"cache"');
  });

  it('ends the session at sign-out, at expiry, and at a password change', async () => {
    const first = await session();
    const outWithoutCsrf = await as(first.cookie, 'DELETE', '/console/session');
    assert.equal(outWithoutCsrf.statusCode, 403, 'a page elsewhere cannot sign the user out either');
    const out = await as(first.cookie, 'DELETE', '/console/session', { 'x-csrf-token': first.csrf });
    assert.equal(out.statusCode, 204);
    assert.match(String(out.headers['set-cookie']), /^herald_console=;.*Expires=Thu, 01 Jan 1970/);
    assert.equal((await as(first.cookie, 'GET', '/account')).statusCode, 401);

    const second = await session();
    t.clock.advance(SESSION_TTL_MS - 1000);
    assert.equal((await as(second.cookie, 'GET', '/account')).statusCode, 200);
    t.clock.advance(1000);
    const expired = await as(second.cookie, 'GET', '/account');
    assert.equal(expired.statusCode, 401);
    assert.match(expired.json().message, /console session has ended/);
    // The browser drops what it kept, as at a sign-out: a sign-out after expiry is refused, and clears it too.
    assert.equal(expired.headers['clear-site-data'], '"cache", "cookies"');
    const lateOut = await as(second.cookie, 'DELETE', '/console/session', { 'x-csrf-token': second.csrf });
    assert.deepEqual([lateOut.statusCode, lateOut.headers['clear-site-data']], [401, '"cache", "cookies"']);

    const third = await session();
    const changed = await t.app.inject({
      method: 'PUT',
      url: `/admin/accounts/${account.row.id}/password`,
      headers: bearer(ADMIN_TOKEN),
      payload: { password: 'a new and longer password' },
    });
    assert.equal(changed.statusCode, 200, changed.body);
    t.clock.advance(1000);
    const afterChange = await as(third.cookie, 'GET', '/account');
    assert.deepEqual([afterChange.statusCode, afterChange.headers['clear-site-data']], [401, '"cache", "cookies"']);
  });

  it('answers 401 to an unknown cookie, and to /console/session under a bearer token', async () => {
    const unknown = await as('herald_console=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', 'GET', '/account');
    assert.equal(unknown.statusCode, 401);
    const viaToken = await t.app.inject({
      method: 'GET',
      url: '/console/session',
      headers: bearer(await t.tokenFor(account)),
    });
    assert.equal(viaToken.statusCode, 401);
  });
});
