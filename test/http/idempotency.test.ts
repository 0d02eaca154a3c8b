import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { forEachDatabase } from '../support/databases.ts';
import { ADMIN_TOKEN, bearer, startTestApp, type TestApp } from '../support/app.ts';

forEachDatabase((dialect) => {
  let t: TestApp;
  beforeEach(async () => {
    t = await startTestApp(dialect);
  });
  afterEach(() => t.close());

  const create = (userName: string, key?: string) =>
    t.app.inject({
      method: 'POST',
      url: '/admin/accounts',
      headers: { ...bearer(ADMIN_TOKEN), ...(key ? { 'idempotency-key': key } : {}) },
      payload: { userName, password: 'correct horse battery staple' },
    });

  const accountCount = async () =>
    (
      await t.ctx.db
        .selectFrom('accounts')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .executeTakeFirstOrThrow()
    ).n;

  const withoutToken = ({ privateToken: _, ...account }: Record<string, unknown>) => account;

  it('replays the first response for the same key and body, and does the work once', async () => {
    const first = await create('ada@example.com', 'key-1');
    assert.equal(first.statusCode, 201);
    const again = await create('ada@example.com', 'key-1');
    assert.equal(again.statusCode, 201);
    assert.equal(again.headers['idempotent-replayed'], 'true');
    // The first answer without the account's private token, which its record never holds.
    assert.deepEqual(again.json(), withoutToken(first.json()));
    assert.equal(Number(await accountCount()), 1);
  });

  it('refuses the same key with another body with 422', async () => {
    assert.equal((await create('ada@example.com', 'key-2')).statusCode, 201);
    const other = await create('grace@example.com', 'key-2');
    assert.equal(other.statusCode, 422);
    assert.equal(other.json().status, 'Failure');
    assert.equal(Number(await accountCount()), 1);
  });

  it('does the work once when two requests with one key race', async () => {
    const [a, b] = await Promise.all([create('ada@example.com', 'key-3'), create('ada@example.com', 'key-3')]);
    assert.deepEqual([a.statusCode, b.statusCode], [201, 201]);
    assert.deepEqual(withoutToken(a.json()), withoutToken(b.json()));
    assert.equal(Number(await accountCount()), 1);
  });

  it('keeps a key for 24 hours, then lets it be used afresh', async () => {
    assert.equal((await create('ada@example.com', 'key-4')).statusCode, 201);
    t.clock.advance(24 * 60 * 60_000 - 1);
    assert.equal((await create('grace@example.com', 'key-4')).statusCode, 422);
    t.clock.advance(1);
    const fresh = await create('grace@example.com', 'key-4');
    assert.equal(fresh.statusCode, 201);
    assert.equal(fresh.json().userName, 'grace@example.com');
  });

  it('does the work once when two requests race with a key whose record has expired', async () => {
    const account = await t.createAccount();
    const token = await t.tokenFor(account);
    const sendCode = () =>
      t.app.inject({
        method: 'POST',
        url: '/sms/single',
        headers: { ...bearer(token), 'idempotency-key': 'key-6' },
        payload: { recipient: '919812300001', senderName: 'HERALD', body: 'code 1234' },
      });
    assert.equal((await sendCode()).statusCode, 202);
    t.clock.advance(24 * 60 * 60_000);
    // Both read the expired record; the second to write must find the first's, not delete it.
    const [a, b] = await Promise.all([sendCode(), sendCode()]);
    assert.deepEqual([a.statusCode, b.statusCode], [202, 202]);
    assert.equal(a.json().data.QueueId, b.json().data.QueueId);
    const sends = await t.ctx.db
      .selectFrom('sends')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow();
    assert.equal(Number(sends.n), 2, 'the first use and one send for the two that raced');
  });

  it('stores nothing for a request that failed, so the client can retry with the key', async () => {
    assert.equal((await create('not-an-email', 'key-5')).statusCode, 400);
    assert.equal((await create('ada@example.com', 'key-5')).statusCode, 201);
  });

  it('without a key, a repeated create is a conflict, not a second account', async () => {
    assert.equal((await create('ada@example.com')).statusCode, 201);
    const again = await create('ADA@example.com');
    assert.equal(again.statusCode, 409);
    assert.equal(Number(await accountCount()), 1);
  });

  it('refuses an over-long key', async () => {
    assert.equal((await create('ada@example.com', 'k'.repeat(256))).statusCode, 400);
  });

  it(
    'keeps of a request only a hash keyed by ENCRYPTION_KEY: the ' + 'body is not in it, nor found by hashing guesses',
    async () => {
      assert.equal((await create('ada@example.com', 'key-6')).statusCode, 201);
      const stored = await t.ctx.db
        .selectFrom('idempotency_keys')
        .select(['request_hash', 'response_body'])
        .where('key', '=', 'key-6')
        .executeTakeFirstOrThrow();
      assert.doesNotMatch(JSON.stringify(stored), /correct horse/);
      // The same request through a process with another key does not match the stored hash (with
      // JWT_SECRET: the database's token key does not open under another key).
      const env = { ENCRYPTION_KEY: 'ab'.repeat(32), JWT_SECRET: 'j'.repeat(32) };
      const other = await startTestApp(dialect, { database: t.database, clock: t.clock, env });
      try {
        const elsewhere = await other.app.inject({
          method: 'POST',
          url: '/admin/accounts',
          headers: { ...bearer(ADMIN_TOKEN), 'idempotency-key': 'key-6' },
          payload: { userName: 'ada@example.com', password: 'correct horse battery staple' },
        });
        assert.equal(elsewhere.statusCode, 422);
      } finally {
        await other.close();
      }
    },
  );
});
