import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { type AddressInfo, connect, createServer, type Socket } from 'node:net';
import { afterEach, beforeEach, it } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import { MemoryCounterStore, RedisCounterStore, type CounterStore } from '../../src/ratelimit/counters.ts';
import { updateAccountSettings } from '../../src/accounts/service.ts';
import { forEachDatabase } from '../support/databases.ts';
import { ADMIN_TOKEN, bearer, startTestApp, type TestAccount, type TestApp } from '../support/app.ts';

const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

forEachDatabase((dialect) => {
  let t: TestApp;
  let account: TestAccount;
  let token: string;
  beforeEach(async () => {
    t = await startTestApp(dialect);
    account = await t.createAccount();
    token = await t.tokenFor(account);
  });
  afterEach(() => t.close());

  const call = (app = t.app) => app.inject({ method: 'GET', url: '/account', headers: bearer(token) });

  it('reports the limit, what remains and when the window resets', async () => {
    t.clock.set(Date.UTC(2026, 10, 22, 12, 0, 15));
    const first = await call();
    assert.equal(first.headers['ratelimit-limit'], '600');
    assert.equal(first.headers['ratelimit-remaining'], '599');
    assert.equal(first.headers['ratelimit-reset'], '45');
    const second = await call();
    assert.equal(second.headers['ratelimit-remaining'], '598');
  });

  it('answers 429 with Retry-After past the per-account limit, and counts again in the next window', async () => {
    await updateAccountSettings(t.ctx.db, t.clock, account.row.id, { rateLimits: { account: 3 } });
    t.clock.set(Date.UTC(2026, 10, 22, 12, 0, 50));
    for (let i = 0; i < 3; i++) assert.equal((await call()).statusCode, 200);
    const limited = await call();
    assert.equal(limited.statusCode, 429);
    assert.equal(limited.json().status, 'Failure');
    assert.equal(limited.headers['retry-after'], '10');
    assert.equal(limited.headers['ratelimit-limit'], '3');
    assert.equal(limited.headers['ratelimit-remaining'], '0');

    t.clock.advance(10_000);
    assert.equal((await call()).statusCode, 200);
  });

  it('limits each account on its own', async () => {
    await updateAccountSettings(t.ctx.db, t.clock, account.row.id, { rateLimits: { account: 1 } });
    const other = await t.createAccount();
    const otherToken = await t.tokenFor(other);
    assert.equal((await call()).statusCode, 200);
    assert.equal((await call()).statusCode, 429);
    const otherCall = await t.app.inject({ method: 'GET', url: '/account', headers: bearer(otherToken) });
    assert.equal(otherCall.statusCode, 200);
  });

  it('lets the operator set an account limit through the admin API, validated', async () => {
    const bad = await t.app.inject({
      method: 'PATCH',
      url: `/admin/accounts/${account.row.id}`,
      headers: bearer(ADMIN_TOKEN),
      payload: { rateLimits: { sms: 0 } },
    });
    assert.equal(bad.statusCode, 400);
    const good = await t.app.inject({
      method: 'PATCH',
      url: `/admin/accounts/${account.row.id}`,
      headers: bearer(ADMIN_TOKEN),
      payload: { rateLimits: { account: 7 } },
    });
    assert.equal(good.statusCode, 200);
    assert.equal(good.json().rateLimits.account, 7);
    assert.equal(good.json().rateLimits.sms, 6000);
    assert.equal((await call()).headers['ratelimit-limit'], '7');
  });

  it('shares one counter between two app instances through Redis', async () => {
    const prefix = `herald-test:${randomBytes(4).toString('hex')}:`;
    const clock = new ManualClock(Date.UTC(2026, 10, 22, 12, 0, 5));
    const storeA = new RedisCounterStore(REDIS_URL, prefix);
    const storeB = new RedisCounterStore(REDIS_URL, prefix);
    const a = await startTestApp(dialect, { database: t.database, counters: storeA, clock });
    const b = await startTestApp(dialect, { database: t.database, counters: storeB, clock });
    try {
      await updateAccountSettings(t.ctx.db, clock, account.row.id, { rateLimits: { account: 4 } });
      const statuses = [];
      const remaining = [];
      for (const app of [a.app, b.app, a.app, b.app, a.app, b.app]) {
        const response = await call(app);
        statuses.push(response.statusCode);
        remaining.push(response.headers['ratelimit-remaining']);
      }
      assert.deepEqual(statuses, [200, 200, 200, 200, 429, 429]);
      assert.deepEqual(remaining, ['3', '2', '1', '0', '0', '0']);
    } finally {
      await a.close();
      await b.close();
      await storeA.close();
      await storeB.close();
    }
  });
});

it('gives up on a Redis that stops answering within half a second, and asks it again a second later', async () => {
  // A proxy to Redis that, while told, holds every byte it takes: a partition, healed later.
  let silent = false;
  const held: Array<() => void> = [];
  const heal = () => {
    silent = false;
    for (const send of held.splice(0)) send();
  };
  const forward = (to: Socket) => (chunk: Buffer) => (silent ? held.push(() => to.write(chunk)) : to.write(chunk));
  const proxy = createServer((client) => {
    const redis = connect(Number(new URL(REDIS_URL).port || 6379), new URL(REDIS_URL).hostname);
    client.on('data', forward(redis));
    redis.on('data', forward(client));
    const end = () => {
      client.destroy();
      redis.destroy();
    };
    client.on('error', end).on('close', end);
    redis.on('error', end).on('close', end);
  });
  proxy.listen(0, '127.0.0.1');
  await once(proxy, 'listening');
  const { port } = proxy.address() as AddressInfo;
  const store = new RedisCounterStore(`redis://127.0.0.1:${port}`, `herald-test:${randomBytes(4).toString('hex')}:`);
  try {
    assert.equal((await store.increment('k', 60_000, 1_000)).count, 1);
    silent = true;
    const asked = performance.now();
    await assert.rejects(store.increment('k', 60_000, 1_000));
    const waited = performance.now() - asked;
    assert.ok(waited < 1_500, `gave up after ${Math.round(waited)} ms`);
    const again = performance.now();
    await assert.rejects(store.increment('k', 60_000, 1_000), /did not answer just now/);
    assert.ok(performance.now() - again < 50, 'not asked again at once');
    heal();
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    assert.equal((await store.increment('k', 60_000, 1_000)).count, 3, 'asked again; the one held came through');
  } finally {
    await store.close();
    proxy.close();
  }
});

// The sliding log behind the sign-in throttle, the same in both stores.
const stores: Array<[string, () => CounterStore]> = [
  ['memory', () => new MemoryCounterStore()],
  // Patient: a Redis slow for half a second on a busy machine would fail a count, not this test's point.
  [
    'Redis',
    () => new RedisCounterStore(REDIS_URL, `herald-test:${randomBytes(4).toString('hex')}:`, { patienceMs: 10_000 }),
  ],
];
for (const [name, open] of stores) {
  const counted = 'counted for the window after each, reset when the oldest leaves it';
  it(`keeps a sliding log of events in ${name}: ${counted}`, async () => {
    const store = open();
    try {
      const windowMs = 60_000;
      await store.logEvent('k', windowMs, 1_000);
      await store.logEvent('k', windowMs, 31_000);
      assert.deepEqual(await store.recentEvents('k', windowMs, 31_000), { count: 2, resetAt: 61_000 });
      assert.deepEqual(await store.recentEvents('k', windowMs, 61_000), { count: 1, resetAt: 91_000 });
      assert.deepEqual(await store.recentEvents('k', windowMs, 91_000), { count: 0, resetAt: 91_000 });
      await store.logEvent('k', windowMs, 92_000);
      await store.clearEvents('k');
      assert.equal((await store.recentEvents('k', windowMs, 92_000)).count, 0);
    } finally {
      await store.close();
    }
  });
}

it('forgets, in memory, the logs of keys never read again once their window has passed', async () => {
  const store = new MemoryCounterStore();
  // A stranger's sign-in failures, each under a user name no one tries again.
  for (let i = 0; i < 10_000; i++) await store.logEvent(`login:user:guess-${i}@example.com`, 60_000, 0);
  assert.equal(store.loggedKeys, 10_000);
  for (let i = 0; i < 10_000; i++) await store.increment('sms:account', 60_000, 120_000);
  assert.equal(store.loggedKeys, 0);
  await store.close();
});
