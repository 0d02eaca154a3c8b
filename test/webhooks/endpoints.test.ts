import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { ManualClock } from '../../src/clock.ts';
import { MAX_ENDPOINTS, normaliseUrl } from '../../src/webhooks/endpoints.ts';
import { GATHER_WINDOW_MS } from '../../src/webhooks/events.ts';
import { ensureSecret } from '../../src/webhooks/secrets.ts';
import { forEachDatabase } from '../support/databases.ts';
import { bearer } from '../support/app.ts';
import { assertFailure, startApiTest, type ApiClient, type ApiTest } from '../support/client.ts';
import { startReceiver, type Received, type Receiver } from './support.ts';
import { buildBatch } from '../email/support.ts';
import { foundInStorage } from '../support/storage.ts';

interface Envelope {
  type: string;
  timestamp: string;
  data: unknown;
}

interface StatusEvent {
  queueId: string;
  messageId: string;
  recipient: string;
  status: string;
}

const UNKNOWN = '0b7e6c1e-8f4a-4d2b-9c3e-5a6f7b8c9d0e';

it('compares URLs normalised: scheme and host case, default port', () => {
  assert.equal(normaliseUrl('HTTP://LocalHost:80/hooks'), normaliseUrl('http://localhost/hooks'));
  assert.equal(normaliseUrl('https://Example.COM:443'), 'https://example.com/');
  assert.notEqual(normaliseUrl('http://localhost:8080/hooks'), normaliseUrl('http://localhost/hooks'));
  assert.notEqual(normaliseUrl('http://localhost/Hooks'), normaliseUrl('http://localhost/hooks'));
});

forEachDatabase((dialect) => {
  let api: ApiTest;
  let alice: ApiClient;
  let bob: ApiClient;
  let receiver: Receiver;
  let other: Receiver;
  beforeEach(async () => {
    // Standard Webhooks verifiers check webhook-timestamp against the real time (±5 min).
    api = await startApiTest(dialect, { clock: new ManualClock(Date.now()) });
    alice = await api.client();
    bob = await api.client();
    receiver = await startReceiver();
    other = await startReceiver();
  });
  afterEach(async () => {
    await receiver.close();
    await other.close();
    await api.close();
  });

  const inject = (
    method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
    url: string,
    as: string,
    payload?: object,
    headers = {},
  ) => api.t.app.inject({ method, url, headers: { ...bearer(as), ...headers }, ...(payload ? { payload } : {}) });
  const create = (body: object, as = alice.token, headers = {}) =>
    inject('POST', '/webhooks/endpoints', as, body, headers);
  async function subscribe(url: string, events: string[], as = alice.token): Promise<string> {
    const response = await create({ url, events }, as);
    assert.equal(response.statusCode, 201, response.body);
    return response.json().endpointId;
  }
  const list = async (as = alice.token) => {
    const response = await inject('GET', '/webhooks/endpoints', as);
    assert.equal(response.statusCode, 200, response.body);
    return response.json().endpoints as Array<{
      endpointId: string;
      url: string;
      events: string[];
      disabledAt: string | null;
    }>;
  };

  /** Runs the queue, lets every stream's gather window pass, and runs it again. */
  async function settle(): Promise<void> {
    await api.drain();
    api.clock.advance(GATHER_WINDOW_MS);
    await api.drain();
  }

  async function verified(post: Received, client = alice): Promise<Envelope> {
    const { secret } = await ensureSecret(api.t.ctx.db, api.t.ctx.encryptionKey, api.clock, client.account.row.id);
    return new Webhook(secret).verify(post.body, post.headers as Record<string, string>) as Envelope;
  }

  /** Every event the receiver got of the type, each post's signature checked with the account's secret. */
  async function eventsAt(at: Receiver, type: string, client = alice): Promise<StatusEvent[]> {
    const envelopes = await Promise.all(at.received.map((post) => verified(post, client)));
    return envelopes.filter((e) => e.type === type).flatMap((e) => e.data as StatusEvent[]);
  }

  const sms = (recipient: string, extra: object = {}) =>
    alice.accept('/sms/single', { senderName: 'HERALD', body: 'Hello', recipient, ...extra });

  it('creates, lists and deletes endpoints, the URL normalised and the events in the contract’s order', async () => {
    assert.deepEqual(await list(), []);
    const response = await create({ url: 'HTTP://127.0.0.1:80/hooks?a=B', events: ['verify.status', 'sms.status'] });
    assert.equal(response.statusCode, 201, response.body);
    const created = response.json();
    assert.match(created.endpointId, /^[0-9a-f-]{36}$/);
    assert.equal(created.url, 'http://127.0.0.1/hooks?a=B');
    assert.deepEqual(created.events, ['sms.status', 'verify.status']);
    assert.deepEqual(await list(), [created]);

    const replayed = await create({ url: 'http://127.0.0.2/x', events: ['sms.inbound'] }, alice.token, {
      'idempotency-key': 'endpoint-1',
    });
    const again = await create({ url: 'http://127.0.0.2/x', events: ['sms.inbound'] }, alice.token, {
      'idempotency-key': 'endpoint-1',
    });
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.deepEqual(again.json(), replayed.json());
    assert.equal((await list()).length, 2);

    const deleted = await inject('DELETE', `/webhooks/endpoints/${created.endpointId.toUpperCase()}`, alice.token);
    assert.equal(deleted.statusCode, 204);
    assert.deepEqual(
      (await list()).map((e) => e.url),
      ['http://127.0.0.2/x'],
    );
    assertFailure(await inject('DELETE', `/webhooks/endpoints/${created.endpointId}`, alice.token), 404, /not found/);
  });

  it('refuses bad URLs and events with 400, unsafe hosts with 422, duplicates and an eleventh with 409', async () => {
    assertFailure(await create({ url: 'ftp://example.com/x', events: ['sms.status'] }), 400, /not valid/);
    assertFailure(await create({ url: 'not a url', events: ['sms.status'] }), 400, /not valid/);
    // A port RFC 3986 allows and no URL parser takes.
    assertFailure(await create({ url: 'http://127.0.0.1:65536/x', events: ['sms.status'] }), 400, /not valid/);
    assertFailure(await create({ url: 'http://127.0.0.1/x', events: [] }), 400, /not valid/);
    assertFailure(await create({ url: 'http://127.0.0.1/x', events: ['sms.nope'] }), 400, /not valid/);
    assertFailure(await create({ url: 'http://127.0.0.1/x', events: ['sms.status', 'sms.status'] }), 400, /valid/);
    assertFailure(await create({ url: 'http://127.0.0.1/x' }), 400, /not valid/);
    assertFailure(await create({ url: 'http://127.0.0.1/x', events: ['sms.status'], extra: 1 }), 400, /valid/);
    // The cloud metadata service, refused as a per-request webHookUrl is (WEBHOOK_ALLOW_PRIVATE or not).
    assertFailure(await create({ url: 'http://169.254.169.254/latest', events: ['sms.status'] }), 422, /post/);
    // Node's client would post port 0 to port 80; the host's verdict just above, at its port, does not pass it.
    await subscribe('http://127.0.0.1:9/x', ['sms.status']);
    const portZero = await create({ url: 'http://127.0.0.1:0/x', events: ['sms.status'] });
    assertFailure(portZero, 422, /will not post/);
    assert.match(portZero.json().errors[0].message, /port 0 is no port/);
    assertFailure(await inject('DELETE', '/webhooks/endpoints/nope', alice.token), 400, /not valid/);

    await subscribe('http://127.0.0.1/hooks', ['sms.status']);
    const duplicate = await create({ url: 'HTTP://127.0.0.1:80/hooks', events: ['email.events'] });
    assertFailure(duplicate, 409, /already/);
    // A #fragment is never sent, nor is an empty query anything: the same receiver.
    for (const url of ['http://127.0.0.1/hooks#a', 'http://127.0.0.1/hooks?'])
      assertFailure(await create({ url, events: ['sms.status'] }), 409, /already/);
    for (let i = 2; i < MAX_ENDPOINTS; i++) await subscribe(`http://127.0.0.1/hooks/${i}`, ['sms.status']);
    assertFailure(await create({ url: 'http://127.0.0.1/eleventh', events: ['sms.status'] }), 409, /at most 10/);
    assert.equal((await list()).length, MAX_ENDPOINTS);
    // Another account's endpoints do not count against this one's.
    await subscribe('http://127.0.0.1/hooks', ['sms.status'], bob.token);
  });

  it('keeps each account’s endpoints apart: another account’s id is 404 and leaves it', async () => {
    const id = await subscribe(receiver.url, ['sms.status']);
    assert.deepEqual(await list(bob.token), []);
    assertFailure(await inject('DELETE', `/webhooks/endpoints/${id}`, bob.token), 404, /not found/);
    assertFailure(await inject('DELETE', `/webhooks/endpoints/${UNKNOWN}`, alice.token), 404, /not found/);
    assert.deepEqual(
      (await list()).map((e) => e.endpointId),
      [id],
    );
    // Bob's sends do not reach Alice's endpoint.
    await bob.accept('/sms/single', { senderName: 'HERALD', body: 'Hi', recipient: '919812300009' });
    await settle();
    assert.equal(receiver.received.length, 0);
  });

  it('posts an SMS send’s sms.status events, signed, to a subscribed endpoint when the send names no URL', async () => {
    await subscribe(receiver.url, ['sms.status']);
    await subscribe(other.url, ['email.events']);
    const queueId = await sms('919812300001');
    await settle();

    const events = await eventsAt(receiver, 'sms.status');
    assert.ok(events.length >= 2, JSON.stringify(events));
    assert.ok(events.every((e) => e.queueId === queueId && e.recipient === '919812300001'));
    assert.equal(events.at(-1)!.status, 'Delivered');
    assert.equal(other.received.length, 0, 'an endpoint of email.events gets no sms.status');

    // Each post is a delivery of the account's, to the endpoint's URL.
    const deliveries = (await alice.get('/webhooks/deliveries')).json().deliveries as Array<Record<string, unknown>>;
    assert.equal(deliveries.length, receiver.received.length);
    assert.ok(deliveries.every((d) => d.url === receiver.url && d.type === 'sms.status' && d.status === 'delivered'));
    assert.deepEqual((await bob.get('/webhooks/deliveries')).json().deliveries, []);
  });

  it('posts each event once to a per-request URL equal to an endpoint’s, however it is written', async () => {
    const id = await subscribe(receiver.url, ['sms.status']);
    // As kept before a #fragment was normalised away: the same receiver still.
    await api.t.ctx.db
      .updateTable('webhook_endpoints')
      .set({ url: `${receiver.url}#old` })
      .where('id', '=', id)
      .execute();
    await subscribe(other.url, ['sms.status']);
    const spelled = `${receiver.url.replace('http://', 'HTTP://')}#status`;
    const queueId = await sms('919812300002', { webHookUrl: spelled });
    await settle();

    const once = await eventsAt(receiver, 'sms.status');
    const everywhere = await eventsAt(other, 'sms.status');
    assert.ok(once.length >= 2);
    assert.deepEqual(once, everywhere, 'the per-request URL gets what the other endpoint gets, once');
    assert.ok(once.every((e) => e.queueId === queueId));
    const deliveries = (await alice.get('/webhooks/deliveries')).json().deliveries as Array<{ url: string }>;
    assert.deepEqual([...new Set(deliveries.map((d) => d.url))].sort(), [other.url, spelled].sort());
  });

  it('retries an endpoint’s post that got a 500, shown by /webhooks/deliveries, and replays it', async () => {
    await subscribe(receiver.url, ['sms.status']);
    receiver.reply({ status: 500 });
    await sms('919812300003');
    await settle();
    const failing = (await alice.get('/webhooks/deliveries?failing=true')).json().deliveries;
    assert.equal(failing.length, 1);
    assert.equal(failing[0].url, receiver.url);
    assert.equal(failing[0].lastStatusCode, 500);
    assert.equal(failing[0].status, 'pending');

    api.clock.advance(5_000);
    await api.drain();
    const after = (await alice.get(`/webhooks/deliveries/${failing[0].id}`)).json();
    assert.equal(after.status, 'delivered');
    assert.equal(after.attempts, 2);
    const posted = receiver.received.filter((post) => post.headers['webhook-id'] === failing[0].id);
    assert.equal(posted.length, 2);
    assert.equal(posted[0].body, posted[1].body);

    const replay = await inject('POST', `/webhooks/deliveries/${failing[0].id}/retry`, alice.token);
    assert.equal(replay.statusCode, 202, replay.body);
    await api.drain();
    assert.equal(receiver.received.filter((post) => post.headers['webhook-id'] === failing[0].id).length, 3);
  });

  it('posts with a URL’s user and password, and shows the password as *** in every read', async () => {
    const url = receiver.url.replace('http://', 'http://hook:S3cret@');
    const created = await create({ url, events: ['sms.status'] });
    assert.equal(created.statusCode, 201, created.body);
    const shown = receiver.url.replace('http://', 'http://hook:***@');
    assert.equal(created.json().url, shown);
    assert.deepEqual(
      (await list()).map((endpoint) => endpoint.url),
      [shown],
    );
    await sms('919812300009');
    await settle();
    assert.ok(receiver.received.length > 0);
    for (const post of receiver.received)
      assert.equal(post.headers.authorization, `Basic ${Buffer.from('hook:S3cret').toString('base64')}`);
    const deliveries = (await alice.get('/webhooks/deliveries')).json().deliveries as Array<{ url: string }>;
    assert.deepEqual([...new Set(deliveries.map((delivery) => delivery.url))], [shown]);
    const patched = await api.t.app.inject({
      method: 'PATCH',
      url: '/account',
      headers: bearer(alice.token),
      payload: { inboundSmsWebhookUrl: url },
    });
    assert.equal(patched.statusCode, 200, patched.body);
    assert.equal(patched.json().inboundSmsWebhookUrl, shown);
    assert.equal((await alice.get('/account')).json().inboundSmsWebhookUrl, shown);
    const reads = [await inject('GET', '/webhooks/endpoints', alice.token), await alice.get('/webhooks/deliveries')];
    for (const read of reads) assert.ok(!read.body.includes('S3cret'), read.body);
  });

  it('keeps a webhook URL’s password sealed wherever a request names one: no table or file holds it', async () => {
    const password = 'Pw4Hooks9x';
    const url = receiver.url.replace('http://', `http://hook:${password}@`);
    assert.equal((await create({ url, events: ['contacts.batch'] })).statusCode, 201);
    const patched = await inject('PATCH', '/account', alice.token, { inboundSmsWebhookUrl: url });
    assert.equal(patched.statusCode, 200, patched.body);
    await sms('919812300010', { webHookUrl: url });
    await alice.accept('/email/batch', buildBatch({ webHookUrl: url }));
    const verify = await alice.post('/verify', { to: '919812300011', webHookUrl: url });
    assert.equal(verify.statusCode, 201, verify.body);
    const cancelled = await alice.post(`/verify/${verify.json().verificationId}/cancel`, {});
    assert.equal(cancelled.statusCode, 200, cancelled.body);
    await alice.upsert([{ email: 'ada@example.com' }], { webhookUrl: url });
    await settle();
    const types = new Set<string>();
    for (const post of receiver.received) {
      assert.equal(post.headers.authorization, `Basic ${Buffer.from(`hook:${password}`).toString('base64')}`);
      types.add((await verified(post)).type);
    }
    assert.deepEqual([...types].sort(), ['contacts.batch', 'email.events', 'sms.status', 'verify.status']);
    const found = await foundInStorage(api, dialect, [password]);
    assert.deepEqual(found[password], [], 'the password in clear in no table, free page or WAL');
  });

  it('seals and masks a URL’s user name when it has no password, as a token', async () => {
    const url = receiver.url.replace('http://', 'http://Tok3nAlone@');
    const created = await create({ url, events: ['sms.status'] });
    assert.equal(created.statusCode, 201, created.body);
    const shown = receiver.url.replace('http://', 'http://***@');
    assert.equal(created.json().url, shown);
    assert.deepEqual(
      (await list()).map((endpoint) => endpoint.url),
      [shown],
    );
    await sms('919812300012');
    await settle();
    assert.ok(receiver.received.length > 0);
    for (const post of receiver.received)
      assert.equal(post.headers.authorization, `Basic ${Buffer.from('Tok3nAlone:').toString('base64')}`);
    assert.deepEqual((await foundInStorage(api, dialect, ['Tok3nAlone'])).Tok3nAlone, []);
  });

  it('refuses with 422 a URL its sealed password would make longer than 2048 characters', async () => {
    const password = 'p'.repeat(1990);
    const url = receiver.url.replace('http://', `http://hook:${password}@`);
    assert.ok(url.length <= 2048);
    for (const response of [
      await create({ url, events: ['sms.status'] }),
      await alice.post('/sms/single', { senderName: 'HERALD', body: 'Hi', recipient: '919812300013', webHookUrl: url }),
    ]) {
      assertFailure(response, 422, /cannot keep this webhook URL/);
      assert.match(response.body, /longer than 2048 characters once its password is sealed/);
    }
    assert.deepEqual(await list(), []);
    assert.deepEqual(await api.t.ctx.db.selectFrom('sends').select('id').execute(), [], 'nothing accepted');
  });

  it('posts contacts.batch to an endpoint when the batch names no URL', async () => {
    await subscribe(receiver.url, ['contacts.batch']);
    const status = await alice.upsert([{ email: 'ada@example.com' }]);
    await settle();
    assert.equal(receiver.received.length, 1);
    const envelope = await verified(receiver.received[0]);
    assert.equal(envelope.type, 'contacts.batch');
    assert.equal((envelope.data as { batchId: string }).batchId, status.batchId);
  });

  it('stops posting to a deleted endpoint', async () => {
    const id = await subscribe(receiver.url, ['sms.status']);
    assert.equal((await inject('DELETE', `/webhooks/endpoints/${id}`, alice.token)).statusCode, 204);
    await sms('919812300004');
    await settle();
    assert.equal(receiver.received.length, 0);
  });

  it('disables the endpoint whose receiver answered 410 Gone to a request’s URL written otherwise', async () => {
    await subscribe(receiver.url, ['sms.status']);
    receiver.reply({ status: 410 });
    await sms('919812300005', { webHookUrl: `${receiver.url.replace('http://', 'HTTP://')}#status` });
    await settle();
    assert.equal(receiver.received.length, 1, 'one stream for the one receiver');
    assert.notEqual((await list())[0].disabledAt, null);
    const [entry] = (await alice.get('/audit')).json().entries;
    assert.equal(entry.action, 'webhookEndpoint.disabled');
  });

  it('disables an endpoint whose receiver answered 410 Gone, not another account’s at the same URL', async () => {
    const id = await subscribe(receiver.url, ['contacts.batch']);
    await subscribe(receiver.url, ['contacts.batch'], bob.token);
    receiver.reply({ status: 410 });
    await alice.upsert([{ email: 'ada@example.com' }]);
    await settle();
    assert.equal(receiver.received.length, 1);
    const [delivery] = (await alice.get('/webhooks/deliveries')).json().deliveries;
    assert.deepEqual([delivery.status, delivery.lastStatusCode], ['failed', 410]);
    const [endpoint] = await list();
    assert.equal(endpoint.disabledAt, delivery.lastAttemptAt);
    const [entry] = (await alice.get('/audit')).json().entries;
    assert.deepEqual([entry.actor, entry.action, entry.target], ['receiver', 'webhookEndpoint.disabled', id]);

    await alice.upsert([{ email: 'grace@example.com' }]);
    await bob.upsert([{ email: 'ada@example.com' }]);
    await settle();
    assert.equal(receiver.received.length, 2, 'Bob’s event only');
    assert.equal((await verified(receiver.received[1], bob)).type, 'contacts.batch');
    assert.equal((await list(bob.token))[0].disabledAt, null);

    assertFailure(await create({ url: receiver.url, events: ['contacts.batch'] }), 409, /disabled .*410 Gone/);
    // Nor is a delivery there replayed by hand, until the endpoint is made again.
    const retry = () => inject('POST', `/webhooks/deliveries/${delivery.id}/retry`, alice.token);
    assertFailure(await retry(), 409, /disabled .*410 Gone/);
    await settle();
    assert.equal(receiver.received.length, 2, 'not posted again');
    assert.equal((await inject('DELETE', `/webhooks/endpoints/${id}`, alice.token)).statusCode, 204);
    assert.equal((await retry()).statusCode, 202);
    await settle();
    assert.equal(receiver.received.length, 3, 'replayed once the endpoint is gone');
    await subscribe(receiver.url, ['contacts.batch']);
    await alice.upsert([{ email: 'lin@example.com' }]);
    await settle();
    assert.equal(receiver.received.length, 4, 'made again, it takes events');
  });

  it('lets a key with the webhooks scope manage endpoints, read list them, and refuses other keys', async () => {
    const keyWith = async (scopes: string[]) => {
      const response = await inject('POST', '/api-keys', alice.token, { name: scopes.join(' '), scopes });
      assert.equal(response.statusCode, 201, response.body);
      return response.json().key as string;
    };
    const webhooks = await keyWith(['webhooks']);
    const reader = await keyWith(['read']);
    const sender = await keyWith(['sms:send', 'contacts:write']);

    const body = { url: 'http://127.0.0.1/hooks', events: ['sms.status'] };
    assertFailure(await create(body, sender), 403, /scope/);
    assertFailure(await create(body, reader), 403, /scope/);
    const created = await create(body, webhooks);
    assert.equal(created.statusCode, 201, created.body);
    const { endpointId } = created.json();

    assertFailure(await inject('GET', '/webhooks/endpoints', sender), 403, /scope/);
    assert.equal((await inject('GET', '/webhooks/endpoints', reader)).json().endpoints.length, 1);
    assert.equal((await inject('GET', '/webhooks/endpoints', webhooks)).json().endpoints.length, 1);

    assertFailure(await inject('DELETE', `/webhooks/endpoints/${endpointId}`, sender), 403, /scope/);
    assertFailure(await inject('DELETE', `/webhooks/endpoints/${endpointId}`, reader), 403, /scope/);
    assert.equal((await inject('DELETE', `/webhooks/endpoints/${endpointId}`, webhooks)).statusCode, 204);
  });
});
