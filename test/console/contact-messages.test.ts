import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import { forEachDatabase } from '../support/databases.ts';
import { startApiTest, type ApiClient, type ApiTest } from '../support/client.ts';
import { buildBatch } from '../email/support.ts';

// GET /contacts/{contactId}/messages: what a contact was sent, for the console's contact page.
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

  const accepted = async (client: ApiClient, path: string, body: object) => {
    const sendId = await client.accept(path, body);
    await api.drain();
    api.clock.advance(1000);
    return sendId;
  };
  const messages = async (client: ApiClient, contactId: number, query = '') => {
    const response = await client.get(`/contacts/${contactId}/messages${query}`);
    assert.equal(response.statusCode, 200, response.body);
    return response.json() as {
      messages: Array<{ channel: string; sendId: string; address: string; status: string }>;
      nextCursor: string | null;
    };
  };

  it(
    'lists the SMS and emails a contact was sent, by list or by address, newest first and a page at a time, and ' +
      "never another account's",
    async () => {
      const ada = {
        email: 'ada@example.com',
        mobileCountryCode: '91',
        mobileNumber: '9812345601',
        mobileOptIn: true,
        emailOptIn: true,
      };
      const [adaId] = (await alice.upsert([ada, { email: 'grace@example.com', emailOptIn: true }])).inserted.contactIds;
      const [bobsContact] = (await bob.upsert([{ ...ada }])).inserted.contactIds;
      const list = await alice.createList('Customers');
      assert.equal((await alice.upsert([ada], { listId: list })).updated.count, 1);

      const sms = await accepted(alice, '/sms/batch', { senderName: 'HERALD', body: 'Hello', listId: [list] });
      const email = await accepted(
        alice,
        '/email/batch',
        buildBatch({}, { recipients: [{ to: 'ada@example.com' }, { to: 'grace@example.com' }] }),
      );
      await accepted(bob, '/sms/batch', {
        senderName: 'HERALD',
        body: 'Not for Alice',
        recipients: [{ mobileNo: '919812345601' }],
      });

      const all = await messages(alice, adaId);
      assert.deepEqual(
        all.messages.map((m) => [m.channel, m.sendId, m.address, m.status]),
        [
          ['email', email, 'ada@example.com', 'Delivered'],
          ['sms', sms, '919812345601', 'Delivered'],
        ],
      );
      assert.equal(all.nextCursor, null);
      const first = await messages(alice, adaId, '?limit=1');
      assert.deepEqual(
        first.messages.map((m) => m.sendId),
        [email],
      );
      assert.ok(first.nextCursor);
      const second = await messages(alice, adaId, `?limit=1&cursor=${first.nextCursor}`);
      assert.deepEqual(
        second.messages.map((m) => m.sendId),
        [sms],
      );
      assert.equal(second.nextCursor, null);

      // Bob's contact has Ada's id number in his own account: his read shows his send only.
      assert.equal(bobsContact, adaId);
      assert.deepEqual(
        (await messages(bob, bobsContact)).messages.map((m) => m.address),
        ['919812345601'],
      );
      assert.equal(
        (await bob.get(`/contacts/${adaId + 1}/messages`)).statusCode,
        404,
        "Alice's other contact is not Bob's",
      );
      assert.equal((await alice.get('/contacts/0/messages')).statusCode, 400);
      assert.equal((await alice.get(`/contacts/${adaId}/messages?cursor=!!`)).statusCode, 400);
    },
  );
});
