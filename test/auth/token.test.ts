import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { MemoryCounterStore, RedisCounterStore, type CounterStore } from '../../src/ratelimit/counters.ts';
import { forEachDatabase } from '../support/databases.ts';
import { bearer, errorFields, startTestApp, type TestAccount, type TestApp } from '../support/app.ts';
import { REDIS_URL, redisPrefix } from '../support/redis.ts';

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
      '.expires',
      '.issued',
      'access_token',
      'expires_in',
      'locale',
      'timeZoneOffset',
      'token_type',
      'userName',
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
    const response = await t.app.inject({
      method: 'POST',
      url: '/token',
      payload: tokenRequest({ userName: account.userName.toUpperCase() }),
    });
    assert.equal(response.statusCode, 200);
  });

  it('throttles guessing a name from one address: 429 and Retry-After, right password too, till the end', async () => {
    for (let i = 0; i < 5; i++) {
      const response = await t.app.inject({
        method: 'POST',
        url: '/token',
        payload: tokenRequest({ password: `guess number ${i}` }),
      });
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
      const response = await t.app.inject({
        method: 'POST',
        url: '/token',
        payload: tokenRequest({ userName: `victim${i}@example.com` }),
      });
      assert.equal(response.statusCode, 401);
    }
    const throttled = await t.app.inject({ method: 'POST', url: '/token', payload: tokenRequest() });
    assert.equal(throttled.statusCode, 429);
    const otherAddress = await t.app.inject({
      method: 'POST',
      url: '/token',
      payload: tokenRequest(),
      remoteAddress: '10.1.2.3',
    });
    assert.equal(otherAddress.statusCode, 200);
  });

  /** An app counting in `counters`, and a sign-in of an account of its own. */
  const signingIn = async (counters: CounterStore) => {
    const app = await startTestApp(dialect, { counters });
    const owner = await app.createAccount();
    const payload = {
      userName: owner.userName,
      password: owner.password,
      privateToken: owner.privateToken,
      validity: 'Default',
    };
    return { app, payload };
  };

  it('lets a sign-in through unthrottled while Redis cannot be reached, as the rate limits do', async () => {
    // Nothing listens on port 1: the store's every call fails after its wait for Redis.
    const counters = new RedisCounterStore('redis://127.0.0.1:1');
    const { app: down, payload } = await signingIn(counters);
    try {
      const response = await down.app.inject({ method: 'POST', url: '/token', payload });
      assert.equal(response.statusCode, 200, response.body);
      const wrong = await down.app.inject({ method: 'POST', url: '/token', payload: { ...payload, password: 'x' } });
      assert.equal(wrong.statusCode, 401, wrong.body);
    } finally {
      await down.close();
      await counters.close();
    }
  });

  it('signs in though the counter store is lost between counting the attempt and its success', async () => {
    // What a Redis that goes away mid-sign-in does: the attempt was counted, its success cannot be.
    class LostMidway extends MemoryCounterStore {
      override async forgetEvent(): Promise<void> {
        throw new Error('Redis is not reachable');
      }
    }
    const { app: lost, payload } = await signingIn(new LostMidway());
    try {
      const response = await lost.app.inject({ method: 'POST', url: '/token', payload });
      assert.equal(response.statusCode, 200, response.body);
    } finally {
      await lost.close();
    }
  });

  // The sign-in throttle counts in the rate limits' store: in memory, or in Redis shared by every API process.
  const stores: Array<[string, () => { counters: CounterStore; clean(): Promise<unknown> }]> = [
    ['in memory', () => ({ counters: new MemoryCounterStore(), clean: async () => {} })],
    [
      'in Redis',
      () => {
        const { prefix, clean } = redisPrefix('login');
        // Patient: a Redis slow for half a second on a busy machine lets a failure through uncounted (fail open).
        return { counters: new RedisCounterStore(REDIS_URL, prefix, { patienceMs: 10_000 }), clean };
      },
    ],
  ];
  for (const [where, open] of stores) {
    describe(`counting sign-in failures per user name and client, ${where}`, () => {
      let throttled: TestApp;
      let owner: TestAccount;
      let store: ReturnType<typeof open>;
      beforeEach(async () => {
        store = open();
        throttled = await startTestApp(dialect, { counters: store.counters });
        owner = await throttled.createAccount();
      });
      afterEach(async () => {
        await throttled.close();
        await store.counters.close();
        await store.clean();
      });

      const signIn = (remoteAddress: string, password = owner.password, headers: Record<string, string> = {}) =>
        throttled.app.inject({
          method: 'POST',
          url: '/token',
          remoteAddress,
          headers,
          payload: { userName: owner.userName, password, privateToken: owner.privateToken, validity: 'Default' },
        });
      const guess = async (remoteAddress: string, times: number) => {
        for (let i = 0; i < times; i++) assert.equal((await signIn(remoteAddress, `guess ${i}`)).statusCode, 401);
      };

      it('locks the address that failed five times out of the name, only that one: the owner signs in', async () => {
        await guess('198.51.100.7', 5);
        assert.equal((await signIn('198.51.100.7')).statusCode, 429);
        assert.equal((await signIn('203.0.113.20')).statusCode, 200);
      });

      it('locks the name for everyone at 100 failures across addresses, none of which reached five', async () => {
        for (let client = 0; client < 25; client++) await guess(`198.51.100.${client + 1}`, 4);
        const locked = await signIn('203.0.113.20');
        assert.equal(locked.statusCode, 429);
        assert.ok(Number(locked.headers['retry-after']) > 0);
      });

      it('counts the addresses of one IPv6 /64 together, and an IPv4-mapped address as its IPv4 one', async () => {
        for (let i = 1; i <= 5; i++) assert.equal((await signIn(`2001:db8:1:2::${i}`, `guess ${i}`)).statusCode, 401);
        assert.equal((await signIn('2001:db8:1:2:ffff:ffff:ffff:ffff')).statusCode, 429);
        assert.equal((await signIn('2001:db8:1:3::1')).statusCode, 200, 'the next /64 is another client');
        await guess('::ffff:198.51.100.9', 5);
        assert.equal((await signIn('198.51.100.9')).statusCode, 429);
      });

      it('counts guesses made at once: five from one address are tried, the rest refused', async () => {
        const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => signIn('198.51.100.7', `guess ${i}`)));
        const codes = answers.map((response) => response.statusCode).sort();
        assert.deepEqual(codes, [...Array(5).fill(401), ...Array(7).fill(429)]);
        assert.equal((await signIn('198.51.100.7')).statusCode, 429, 'the owner too, from there');
        assert.equal((await signIn('203.0.113.20')).statusCode, 200);
      });

      it("forgets an address's failures of the name once it signs in from there", async () => {
        await guess('198.51.100.7', 4);
        assert.equal((await signIn('198.51.100.7')).statusCode, 200);
        await guess('198.51.100.7', 4);
        assert.equal((await signIn('198.51.100.7')).statusCode, 200, 'four more failures are not five');
      });
    });
  }

  it('takes the client from X-Forwarded-For as TRUST_PROXY says: without it every client is the proxy', async () => {
    const request = (app: TestApp, owner: TestAccount, forwardedFor: string, password: string) =>
      app.app.inject({
        method: 'POST',
        url: '/token',
        remoteAddress: '10.0.0.1',
        headers: { 'x-forwarded-for': forwardedFor },
        payload: { userName: owner.userName, password, privateToken: owner.privateToken, validity: 'Default' },
      });
    // [TRUST_PROXY, how the guesser's requests come, another client's sign-in]
    const cases: Array<[string, (i: number) => string, number]> = [
      ['true', () => '198.51.100.7', 200],
      // The proxy appends the peer it saw; what the guesser wrote before that is not believed.
      ['10.0.0.0/8', (i) => `192.0.2.${i}, 198.51.100.7`, 200],
      ['false', () => '198.51.100.7', 429],
    ];
    for (const [trustProxy, guesser, otherClient] of cases) {
      const app = await startTestApp(dialect, { env: { TRUST_PROXY: trustProxy } });
      try {
        const owner = await app.createAccount();
        for (let i = 0; i < 5; i++) assert.equal((await request(app, owner, guesser(i), `guess ${i}`)).statusCode, 401);
        const told = `TRUST_PROXY=${trustProxy}`;
        assert.equal((await request(app, owner, guesser(9), owner.password)).statusCode, 429, told);
        assert.equal((await request(app, owner, '203.0.113.20', owner.password)).statusCode, otherClient, told);
      } finally {
        await app.close();
      }
    }
  });
});
