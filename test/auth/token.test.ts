import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { forEachDatabase } from '../support/databases.ts';
import { bearer, errorFields, startTestApp, type TestAccount, type TestApp } from '../support/app.ts';

forEachDatabase((dialect) => {
  let t: TestApp;
  let account: TestAccount;
  beforeEach(async () => {
    t = await startTestApp(dialect);
    account = await t.createAccount();
  });
  afterEach(() => t.close());

  const tokenRequest = (overrides: Record<string, unknown> = {}) => ({
    userName: account.userName,
    password: account.password,
    privateToken: account.privateToken,
    validity: 'Default',
    ...overrides,
  });

  it('answers with exactly the fields and types of SPEC §5.3', async () => {
    const response = await t.app.inject({ method: 'POST', url: '/token', payload: tokenRequest() });
    assert.equal(response.statusCode, 200);
    const body = response.json();
    assert.deepEqual(Object.keys(body).sort(), [
      '.expires', '.issued', 'access_token', 'expires_in', 'locale', 'timeZoneOffset', 'token_type', 'userName',
    ]);
    assert.equal(typeof body.access_token, 'string');
    assert.equal(body.access_token.split('.').length, 3);
    assert.equal(body.token_type, 'Bearer');
    assert.equal(Number.isInteger(body.expires_in), true);
    assert.equal(body.userName, account.userName);
    assert.equal(body['.issued'], '2026-11-22T12:00:00.000Z');
    assert.match(body['.expires'], /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    assert.equal(body.timeZoneOffset, 'UTC+00:00~Coordinated Universal Time');
    assert.equal(body.locale, 'en');
  });

  const lifetimes: Array<[string, number, string]> = [
    ['Default', 12_000 * 60, '2026-12-00T12:00:00.000Z'],
    ['ShortLive', 30, '2026-11-22T12:00:30.000Z'],
    ['LongLive', (Date.UTC(2036, 10, 22, 12) - Date.UTC(2026, 10, 22, 12)) / 1000, '2036-11-22T12:00:00.000Z'],
  ];
  for (const [validity, seconds, expires] of lifetimes) {
    it(`a ${validity} token lives ${seconds} s and is refused one second after`, async () => {
      const response = await t.app.inject({ method: 'POST', url: '/token', payload: tokenRequest({ validity }) });
      const body = response.json();
      assert.equal(body.expires_in, seconds);
      assert.equal(Date.parse(body['.expires']) - Date.parse(body['.issued']), seconds * 1000);
      if (validity !== 'Default') assert.equal(body['.expires'], expires);

      t.clock.advance(seconds * 1000 - 1000);
      const stillValid = await t.app.inject({ method: 'GET', url: '/account', headers: bearer(body.access_token) });
      assert.equal(stillValid.statusCode, 200);

      t.clock.advance(1000);
      const expired = await t.app.inject({ method: 'GET', url: '/account', headers: bearer(body.access_token) });
      assert.equal(expired.statusCode, 401);
      assert.equal(expired.headers['www-authenticate'], 'Bearer error="invalid_token"');
      assert.match(expired.json().message, /expired/);
    });
  }

  it('requires all four fields and names each missing one', async () => {
    const response = await t.app.inject({ method: 'POST', url: '/token', payload: {} });
    assert.equal(response.statusCode, 400);
    assert.equal(response.json().status, 'Failure');
    assert.deepEqual(errorFields(response).sort(), ['password', 'privateToken', 'userName', 'validity']);
  });

  it('refuses an unknown validity and a privateToken that is not a UUID', async () => {
    const response = await t.app.inject({
      method: 'POST',
      url: '/token',
      payload: tokenRequest({ validity: 'Forever', privateToken: 'abc' }),
    });
    assert.equal(response.statusCode, 400);
    assert.deepEqual(errorFields(response).sort(), ['privateToken', 'validity']);
  });

  it('gives one identical 401 for a wrong user name, password or private token', async () => {
    const attempts = [
      tokenRequest({ userName: 'nobody@example.com' }),
      tokenRequest({ password: 'wrong password!!' }),
      tokenRequest({ privateToken: '00000000-0000-4000-8000-000000000000' }),
    ];
    const bodies = [];
    for (const payload of attempts) {
      const response = await t.app.inject({ method: 'POST', url: '/token', payload });
      assert.equal(response.statusCode, 401);
      bodies.push(response.body);
    }
    assert.equal(new Set(bodies).size, 1);
  });

  it('accepts the user name in any letter case', async () => {
    const response = await t.app.inject({ method: 'POST', url: '/token', payload: tokenRequest({ userName: account.userName.toUpperCase() }) });
    assert.equal(response.statusCode, 200);
  });

  it('throttles guessing one user name with 429 and Retry-After, even with the right password, until the window ends', async () => {
    for (let i = 0; i < 5; i++) {
      const response = await t.app.inject({ method: 'POST', url: '/token', payload: tokenRequest({ password: `guess number ${i}` }) });
      assert.equal(response.statusCode, 401);
    }
    const throttled = await t.app.inject({ method: 'POST', url: '/token', payload: tokenRequest() });
    assert.equal(throttled.statusCode, 429);
    assert.equal(throttled.json().status, 'Failure');
    assert.ok(Number(throttled.headers['retry-after']) > 0);

    t.clock.advance(15 * 60_000);
    const later = await t.app.inject({ method: 'POST', url: '/token', payload: tokenRequest() });
    assert.equal(later.statusCode, 200);
  });

  it('gives the true wait in Retry-After: until the oldest of the failures is 15 minutes old', async () => {
    // 14 minutes into a clock-aligned quarter hour: a fixed window would say "retry in 56 s".
    t.clock.advance(14 * 60_000);
    for (let i = 0; i < 5; i++) {
      await t.app.inject({ method: 'POST', url: '/token', payload: tokenRequest({ password: `guess number ${i}` }) });
      t.clock.advance(1000);
    }
    const throttled = await t.app.inject({ method: 'POST', url: '/token', payload: tokenRequest() });
    assert.equal(throttled.statusCode, 429);
    assert.equal(throttled.headers['retry-after'], String(15 * 60 - 5));

    t.clock.advance((15 * 60 - 5) * 1000 - 1);
    assert.equal((await t.app.inject({ method: 'POST', url: '/token', payload: tokenRequest() })).statusCode, 429);
    t.clock.advance(1);
    assert.equal((await t.app.inject({ method: 'POST', url: '/token', payload: tokenRequest() })).statusCode, 200);
  });

  it('throttles one client address guessing across many user names', async () => {
    for (let i = 0; i < 20; i++) {
      const response = await t.app.inject({ method: 'POST', url: '/token', payload: tokenRequest({ userName: `victim${i}@example.com` }) });
      assert.equal(response.statusCode, 401);
    }
    const throttled = await t.app.inject({ method: 'POST', url: '/token', payload: tokenRequest() });
    assert.equal(throttled.statusCode, 429);
    const otherAddress = await t.app.inject({ method: 'POST', url: '/token', payload: tokenRequest(), remoteAddress: '10.1.2.3' });
    assert.equal(otherAddress.statusCode, 200);
  });
});
