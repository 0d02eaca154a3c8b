import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { webhookDeliveryHandler } from '../../src/webhooks/deliver.ts';
import { emitWebhook } from '../../src/webhooks/outbox.ts';
import { forEachDatabase } from '../support/databases.ts';
import { bearer, startTestApp, type TestAccount, type TestApp } from '../support/app.ts';
import { runDeliveryJob, startReceiver, type Receiver } from './support.ts';

forEachDatabase((dialect) => {
  let t: TestApp;
  let alice: TestAccount;
  let bob: TestAccount;
  let aliceToken: string;
  let bobToken: string;
  let receiver: Receiver;
  beforeEach(async () => {
    t = await startTestApp(dialect, { env: { WEBHOOK_ALLOW_PRIVATE: 'true' } });
    alice = await t.createAccount();
    bob = await t.createAccount();
    aliceToken = await t.tokenFor(alice);
    bobToken = await t.tokenFor(bob);
    receiver = await startReceiver();
  });
  afterEach(async () => {
    await receiver.close();
    await t.close();
  });

  const emit = (account: TestAccount, type = 'contacts.batch') =>
    t.ctx.db
      .transaction()
      .execute((trx) =>
        emitWebhook(trx, t.clock, { accountId: account.row.id, url: receiver.url, type, data: { inserted: 1 } }),
      );

  const get = (url: string, token = aliceToken) => t.app.inject({ method: 'GET', url, headers: bearer(token) });
  const post = (url: string, token = aliceToken, headers: Record<string, string> = {}) =>
    t.app.inject({ method: 'POST', url, headers: { ...bearer(token), ...headers } });

  it('gives each account its own whsec_ secret, the same on every read', async () => {
    const first = await get('/webhooks/secret');
    assert.equal(first.statusCode, 200);
    assert.match(first.json().secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
    assert.equal(first.json().previousSecretExpiresAt, null);
    assert.equal((await get('/webhooks/secret')).json().secret, first.json().secret);
    assert.notEqual((await get('/webhooks/secret', bobToken)).json().secret, first.json().secret);
    assert.equal((await t.app.inject({ method: 'GET', url: '/webhooks/secret' })).statusCode, 401);
  });

  it(
    'rotates the secret, keeps the old one signing for 24 hours, and replays a rotation sent again with its ' +
      'Idempotency-Key',
    async () => {
      const old = (await get('/webhooks/secret')).json().secret;
      const rotated = await post('/webhooks/secret/rotate', aliceToken, { 'idempotency-key': 'rotate-1' });
      assert.equal(rotated.statusCode, 200);
      assert.notEqual(rotated.json().secret, old);
      assert.equal(rotated.json().previousSecretExpiresAt, new Date(t.clock.now() + 24 * 3_600_000).toISOString());
      assert.deepEqual((await get('/webhooks/secret')).json(), rotated.json());

      const again = await post('/webhooks/secret/rotate', aliceToken, { 'idempotency-key': 'rotate-1' });
      assert.equal(again.headers['idempotent-replayed'], 'true');
      assert.equal(again.json().secret, rotated.json().secret);

      t.clock.advance(24 * 3_600_000);
      assert.equal((await get('/webhooks/secret')).json().previousSecretExpiresAt, null);
    },
  );

  it('lists the account’s deliveries newest first, a page at a time', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      ids.push(await emit(alice, `event.${i}`));
      if (i !== 2) t.clock.advance(1_000); // two deliveries share a creation time: the id breaks the tie
    }
    await emit(bob);

    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const response = await get(`/webhooks/deliveries?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
      assert.equal(response.statusCode, 200);
      const body = response.json();
      assert.ok(body.deliveries.length <= 2);
      seen.push(...body.deliveries.map((d: { id: string }) => d.id));
      cursor = body.nextCursor;
    } while (cursor);
    assert.deepEqual(seen, [ids[4], ...[ids[2], ids[3]].sort().reverse(), ids[1], ids[0]]);

    const [latest] = (await get('/webhooks/deliveries?limit=1')).json().deliveries;
    assert.deepEqual(latest, {
      id: ids[4],
      type: 'event.4',
      url: receiver.url,
      status: 'pending',
      attempts: 0,
      lastStatusCode: null,
      lastError: null,
      lastAttemptAt: null,
      nextAttemptAt: new Date(t.clock.now() - 1_000).toISOString(),
      createdAt: new Date(t.clock.now() - 1_000).toISOString(),
      deliveredAt: null,
    });
  });

  it('refuses a cursor it did not give out and a limit out of range', async () => {
    const badCursor = await get('/webhooks/deliveries?cursor=bm9wZQ');
    assert.equal(badCursor.statusCode, 400);
    assert.deepEqual(badCursor.json().errors, [
      { field: 'cursor', message: 'must be a nextCursor from a previous page' },
    ]);
    for (const limit of ['0', '101', 'ten'])
      assert.equal((await get(`/webhooks/deliveries?limit=${limit}`)).statusCode, 400, limit);
  });

  it('shows one delivery with the body it posts', async () => {
    const id = await emit(alice);
    // Its id as a UUID may be written, in capitals too.
    const response = await get(`/webhooks/deliveries/${id.toUpperCase()}`);
    assert.equal(response.statusCode, 200);
    assert.equal(response.json().id, id);
    assert.deepEqual(response.json().payload, {
      type: 'contacts.batch',
      timestamp: new Date(t.clock.now()).toISOString(),
      data: { inserted: 1 },
    });
  });

  it('keeps each account to its own deliveries: another’s are 404', async () => {
    const id = await emit(alice);
    assert.deepEqual((await get('/webhooks/deliveries', bobToken)).json(), { deliveries: [], nextCursor: null });
    const read = await get(`/webhooks/deliveries/${id}`, bobToken);
    assert.equal(read.statusCode, 404);
    assert.equal(read.json().status, 'Failure');
    assert.equal((await post(`/webhooks/deliveries/${id}/retry`, bobToken)).statusCode, 404);
    assert.equal((await get('/webhooks/deliveries/00000000-0000-4000-8000-000000000000')).statusCode, 404);
  });

  it(
    'lists with failing=true only the deliveries whose last ' + 'attempt failed, given up or waiting for a retry',
    async () => {
      const handler = webhookDeliveryHandler(t.ctx);
      const attempt = async (status: number) => {
        const id = await emit(alice);
        t.clock.advance(1_000);
        receiver.reply({ status });
        await runDeliveryJob(handler, t.ctx.db, id);
        return id;
      };
      await attempt(200);
      const gaveUp = await attempt(410);
      const retrying = await attempt(500);
      await emit(alice); // not attempted yet
      await emit(bob);
      const failing = (await get('/webhooks/deliveries?failing=true')).json();
      assert.deepEqual(
        failing.deliveries.map((d: { id: string; status: string }) => [d.id, d.status]),
        [
          [retrying, 'pending'],
          [gaveUp, 'failed'],
        ],
      );
      assert.equal(failing.nextCursor, null);
      const first = (await get('/webhooks/deliveries?failing=true&limit=1')).json();
      assert.deepEqual(
        first.deliveries.map((d: { id: string }) => d.id),
        [retrying],
      );
      const second = (await get(`/webhooks/deliveries?failing=true&limit=1&cursor=${first.nextCursor}`)).json();
      assert.deepEqual(
        second.deliveries.map((d: { id: string }) => d.id),
        [gaveUp],
      );
      assert.equal((await get('/webhooks/deliveries?failing=false')).json().deliveries.length, 4);
      assert.deepEqual((await get('/webhooks/deliveries?failing=true', bobToken)).json().deliveries, []);
      assert.equal((await get('/webhooks/deliveries?failing=yes')).statusCode, 400);
    },
  );

  it('replays a delivery now with the same webhook-id, retiring the job it had', async () => {
    const handler = webhookDeliveryHandler(t.ctx);
    const id = await emit(alice);
    receiver.reply({ status: 410 });
    assert.equal(await runDeliveryJob(handler, t.ctx.db, id), 'done');
    assert.equal((await get(`/webhooks/deliveries/${id}`)).json().status, 'failed');

    t.clock.advance(60_000);
    const replay = await post(`/webhooks/deliveries/${id.toUpperCase()}/retry`);
    assert.equal(replay.statusCode, 202);
    assert.equal(replay.json().status, 'pending');
    assert.equal(replay.json().attempts, 1);
    assert.equal(replay.json().nextAttemptAt, new Date(t.clock.now()).toISOString());

    // A job of the delivery's first generation (say, a retry scheduled before the replay) stands down.
    assert.equal(await runDeliveryJob(handler, t.ctx.db, id, 0), 'done');
    assert.equal(receiver.received.length, 1);

    assert.equal(await runDeliveryJob(handler, t.ctx.db, id), 'done');
    assert.equal(receiver.received.length, 2);
    assert.equal(receiver.received[1].headers['webhook-id'], id);
    assert.equal(receiver.received[1].body, receiver.received[0].body);
    const after = (await get(`/webhooks/deliveries/${id}`)).json();
    assert.equal(after.status, 'delivered');
    assert.equal(after.attempts, 2);
    assert.equal(after.deliveredAt, new Date(t.clock.now()).toISOString());
  });
});
