import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import { forEachDatabase } from '../support/databases.ts';
import { startApiTest, type ApiClient, type ApiTest } from '../support/client.ts';
import { buildBatch } from '../email/support.ts';

// GET /sms?recipient=, GET /email/batch?email= and GET /messages/{messageId}
// (ARCHITECTURE.md, "Data rights and management").
forEachDatabase((dialect) => {
  let api: ApiTest;
  let alice: ApiClient;
  let bob: ApiClient;
  beforeEach(async () => {
    api = await startApiTest(dialect, {
      clock: new ManualClock(Date.UTC(2026, 2, 10, 12)),
      env: { SMS_TRANSPORT: 'sandbox:', EMAIL_TRANSPORT: 'sandbox:' },
    });
    alice = await api.client();
    bob = await api.client();
  });
  afterEach(() => api.close());

  const sent = async (client: ApiClient, path: string, body: object) => {
    const id = await client.accept(path, body);
    await api.drain();
    api.clock.advance(1000);
    return id;
  };
  const sms = (client: ApiClient, ...numbers: string[]) =>
    sent(client, '/sms/batch', {
      senderName: 'HERALD',
      body: 'Hello',
      recipients: numbers.map((mobileNo) => ({ mobileNo })),
    });
  const page = async (client: ApiClient, url: string) => {
    const response = await client.get(url);
    assert.equal(response.statusCode, 200, response.body);
    return response.json();
  };

  it('finds the SMS requests that include a number no contact holds, newest first, a page at a time', async () => {
    const first = await sms(alice, '919812345601', '919812345602');
    await sms(alice, '919812345602');
    const third = await sms(alice, '919812345603', '919812345601');
    await sms(bob, '919812345601');
    assert.deepEqual((await page(alice, '/contacts?mobile=919812345601')).contacts, []);

    const found = await page(alice, '/sms?recipient=919812345601');
    assert.deepEqual(
      found.sends.map((s: { queueId: string }) => s.queueId),
      [third, first],
    );
    assert.deepEqual(Object.keys(found.sends[0]), Object.keys((await page(alice, '/sms')).sends[0]));
    assert.deepEqual(found.sends[1].totals, { Delivered: 2 });
    assert.equal(found.nextCursor, null);

    const one = await page(alice, '/sms?recipient=919812345601&limit=1');
    assert.deepEqual(
      one.sends.map((s: { queueId: string }) => s.queueId),
      [third],
    );
    const two = await page(alice, `/sms?recipient=919812345601&limit=1&cursor=${one.nextCursor}`);
    assert.deepEqual([two.sends.map((s: { queueId: string }) => s.queueId), two.nextCursor], [[first], null]);
    // The number as it may be written: a trunk 0 after the country code.
    assert.equal((await page(alice, '/sms?recipient=9109812345601')).sends.length, 2);
    assert.deepEqual((await page(alice, '/sms?recipient=919812345699')).sends, []);
    assert.equal((await page(bob, '/sms?recipient=919812345601')).sends.length, 1, "never another account's");
    assert.equal((await alice.get('/sms?recipient=%2B919812345601')).statusCode, 400);
    assert.equal((await alice.get('/sms?recipient=91981234560a')).statusCode, 400);
    assert.equal((await alice.get('/sms?recipient=919812345601&cursor=bm9wZQ')).statusCode, 400);
  });

  it('finds the email batches that include an address, in any case', async () => {
    const one = await sent(alice, '/email/batch', buildBatch({}, { recipients: [{ to: 'ada@example.com' }] }));
    await sent(alice, '/email/batch', buildBatch({}, { recipients: [{ to: 'grace@example.com' }] }));
    const three = await sent(
      alice,
      '/email/batch',
      buildBatch({}, { recipients: [{ to: 'grace@example.com' }, { to: 'Ada@Example.com' }] }),
    );
    await sent(bob, '/email/batch', buildBatch({}, { recipients: [{ to: 'ada@example.com' }] }));
    const found = await page(alice, '/email/batch?email=ADA%40example.com');
    assert.deepEqual(
      found.batches.map((b: { batchId: string }) => b.batchId),
      [three, one],
    );
    assert.deepEqual(found.batches[0].totals, { Delivered: 2 });
    assert.deepEqual((await page(alice, '/email/batch?email=nobody%40example.com')).batches, []);
    assert.equal((await page(bob, '/email/batch?email=ada%40example.com')).batches.length, 1);
    assert.equal((await alice.get('/email/batch?email=not-an-address')).statusCode, 400);
  });

  it('reads one message by its messageId, SMS or email, and never one of another account', async () => {
    const queueId = await sms(alice, '919812345601');
    const smsRead = await page(alice, `/sms/${queueId}`);
    const smsMessage = smsRead.recipients[0];
    const found = await page(alice, `/messages/${smsMessage.messageId}`);
    assert.deepEqual(found, {
      channel: 'sms',
      queueId,
      messageId: smsMessage.messageId,
      recipient: '919812345601',
      status: 'Delivered',
      reason: null,
      history: smsMessage.history,
    });
    assert.equal((await page(alice, `/messages/${smsMessage.messageId.toUpperCase()}`)).queueId, queueId);

    const batchId = await sent(alice, '/email/batch', buildBatch({}, { recipients: [{ to: 'ada@example.com' }] }));
    const emailMessage = (await page(alice, `/email/batch/${batchId}`)).recipients[0];
    assert.deepEqual(await page(alice, `/messages/${emailMessage.messageId}`), {
      channel: 'email',
      batchId,
      messageId: emailMessage.messageId,
      email: 'ada@example.com',
      status: 'Delivered',
      reason: null,
      history: emailMessage.history,
    });

    assert.equal((await bob.get(`/messages/${smsMessage.messageId}`)).statusCode, 404);
    assert.equal((await bob.get(`/messages/${emailMessage.messageId}`)).statusCode, 404);
    assert.equal((await alice.get('/messages/00000000-0000-4000-8000-000000000000')).statusCode, 404);
    assert.equal((await alice.get('/messages/nope')).statusCode, 400);
  });

  it("finds a deleted contact's messages by its number, and reads them by messageId", async () => {
    const [id] = (await alice.upsert([{ mobileCountryCode: '91', mobileNumber: '9812345607', mobileOptIn: true }]))
      .inserted.contactIds;
    const byList = await sent(alice, '/sms/batch', {
      senderName: 'HERALD',
      body: 'Hi',
      listId: [(await page(alice, '/lists')).lists[0].listId],
    });
    const [message] = (await page(alice, `/sms/${byList}`)).recipients;
    const deleted = await api.t.app.inject({
      method: 'DELETE',
      url: `/contacts/${id}`,
      headers: { authorization: `Bearer ${alice.token}` },
    });
    assert.equal(deleted.statusCode, 204);
    assert.deepEqual(
      (await page(alice, '/sms?recipient=919812345607')).sends.map((s: { queueId: string }) => s.queueId),
      [byList],
    );
    assert.equal((await page(alice, `/messages/${message.messageId}`)).status, 'Delivered');
  });
});
