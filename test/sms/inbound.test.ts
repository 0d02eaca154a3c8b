import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { ManualClock } from '../../src/clock.ts';
import { lockAccountContacts } from '../../src/crm/queries.ts';
import { receiveInboundSms } from '../../src/sms/inbound.ts';
import { startSmsc, type Smsc } from '../../src/sim/smsc.ts';
import { ADMIN_TOKEN } from '../support/app.ts';
import { forEachDatabase } from '../support/databases.ts';
import { waitFor, waitForLockWait } from '../support/wait.ts';
import { startReceiver, type Receiver } from '../webhooks/support.ts';
import { startApiTest, type ApiClient, type ApiTest } from '../support/client.ts';

/** Messages from handsets (MO): routing, storing, STOP and START, the webhook; on the sandbox and over SMPP. */
interface InboundEvent {
  from: string;
  to: string;
  text: string;
  at: string;
  contactId: number | null;
}

const NUMBER = '447700900123';

forEachDatabase((dialect) => {
  let api: ApiTest | undefined;
  let smsc: Smsc | undefined;
  let alice: ApiClient;
  let bob: ApiClient;
  let receiver: Receiver;

  /**
   * Herald (sandbox transport unless `env` says otherwise) with two accounts, Alice's MO posted to
   * the receiver unless `hooked` is false.
   */
  const start = async (env: Record<string, string> = {}, hooked = true) => {
    // Standard Webhooks verifiers check webhook-timestamp against the real time.
    api = await startApiTest(dialect, { clock: new ManualClock(Date.now()), env });
    alice = await api.client();
    bob = await api.client();
    if (!hooked) return;
    const patched = await patchAccount(alice, { inboundSmsWebhookUrl: receiver.url });
    assert.equal(patched.statusCode, 200, patched.body);
  };
  beforeEach(async () => {
    receiver = await startReceiver();
  });
  afterEach(async () => {
    await api?.worker.stop();
    await api?.close();
    await smsc?.close();
    await receiver.close();
    api = undefined;
    smsc = undefined;
  });

  /** The service's default sender name, as the test app has it. */
  const shared = { defaultSenderName: 'HERALD' };
  const patchAccount = (client: ApiClient, payload: object) =>
    api!.t.app.inject({
      method: 'PATCH',
      url: '/account',
      headers: { authorization: `Bearer ${client.token}` },
      payload,
    });
  const addSenderName = (client: ApiClient, name: string) =>
    api!.t.app.inject({
      method: 'POST',
      url: `/admin/accounts/${client.account.row.id}/sender-names`,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      payload: { name },
    });
  const mo = (client: ApiClient, body: { from: string; to: string; text: string }) =>
    client.post('/sandbox/sms/inbound', body);
  const send = async (client: ApiClient, path: '/sms/single' | '/sms/batch', body: object) => {
    const response = await client.post(path, body);
    assert.equal(response.statusCode, 202, response.body);
    await api!.drain();
    return response.json().data.QueueId as string;
  };
  /** The sms.inbound events posted to Alice's receiver so far, their signatures checked. */
  const posted = async () => {
    api!.clock.advance(1000);
    await api!.drain();
    const secret = (await alice.get('/webhooks/secret')).json().secret as string;
    return receiver.received.map(
      (post) =>
        new Webhook(secret).verify(post.body, post.headers as Record<string, string>) as {
          type: string;
          data: InboundEvent[];
        },
    );
  };
  const suppressions = async (client: ApiClient) =>
    (await client.get('/sms/suppressions'))
      .json()
      .suppressions.map((s: { number: string; reason: string }) => [s.number, s.reason]);

  it(
    'routes an MO to the account holding its numeric destination, ' + 'stores it with the contact, and posts it signed',
    async () => {
      await start();
      assert.equal((await addSenderName(alice, NUMBER)).statusCode, 201);
      const account = (await alice.get('/account')).json();
      assert.equal(account.inboundSmsWebhookUrl, receiver.url);
      const { inserted } = await alice.upsert([
        { mobileCountryCode: '91', mobileNumber: '9812300001', mobileOptIn: true },
      ]);

      const received = await mo(alice, { from: '+919812300001', to: NUMBER, text: 'Is my order\nready?' });
      assert.equal(received.statusCode, 201, received.body);
      assert.deepEqual(received.json().contactId, inserted.contactIds[0]);
      const [post, ...more] = await posted();
      assert.equal(more.length, 0);
      assert.equal(post.type, 'sms.inbound');
      assert.deepEqual(post.data, [
        {
          from: '919812300001',
          to: NUMBER,
          text: 'Is my order\nready?',
          at: new Date(api!.clock.now() - 1000).toISOString(),
          contactId: inserted.contactIds[0],
        },
      ]);
      const stored = await api!.t.ctx.db.selectFrom('sms_inbound').selectAll().execute();
      assert.deepEqual(
        stored.map((row) => [row.account_id, row.sender, row.destination, Number(row.contact_id)]),
        [[alice.account.row.id, '919812300001', NUMBER, inserted.contactIds[0]]],
      );

      // Bob cannot make one to Alice's number, and with no webhook URL an MO is stored only.
      assert.equal((await mo(bob, { from: '919812300001', to: NUMBER, text: 'hi' })).statusCode, 422);
      assert.equal((await patchAccount(alice, { inboundSmsWebhookUrl: null })).json().inboundSmsWebhookUrl, null);
      assert.equal((await mo(alice, { from: '919812300009', to: NUMBER, text: 'no contact' })).json().contactId, null);
      assert.equal((await posted()).length, 1);
      assert.equal((await api!.t.ctx.db.selectFrom('sms_inbound').selectAll().execute()).length, 2);
    },
  );

  it(
    'routes an MO to a shared sender name to the account that last sent to the number from it; an MO to nowhere ' +
      'is dropped',
    async () => {
      await start();
      await send(alice, '/sms/single', { recipient: '919812300002', senderName: 'HERALD', body: 'Your code is 1234' });
      await send(bob, '/sms/single', { recipient: '919812300003', senderName: 'HERALD', body: 'Your code is 5678' });
      const inbound = (from: string) =>
        receiveInboundSms(
          api!.t.ctx.database,
          api!.clock,
          {
            from,
            to: 'HERALD',
            text: 'thanks',
            at: api!.clock.now(),
          },
          shared,
        );
      assert.equal((await inbound('919812300002'))?.accountId, alice.account.row.id);
      assert.equal((await inbound('919812300003'))?.accountId, bob.account.row.id);
      assert.equal(await inbound('919812300004'), null);
      // Bob writes to Alice's handset later: its next reply is Bob's.
      await send(bob, '/sms/batch', {
        recipients: [{ mobileNo: '919812300002' }],
        senderName: 'HERALD',
        body: 'Sale today',
      });
      assert.equal((await inbound('919812300002'))?.accountId, bob.account.row.id);
      // Bob's campaign accepted before Alice's next message and sent after it: the reply is Bob's.
      const later = await send(bob, '/sms/batch', {
        recipients: [{ mobileNo: '919812300003' }],
        senderName: 'HERALD',
        body: 'Sale soon',
        scheduleDateTime: new Date(api!.clock.now() + 120_000).toISOString(),
      });
      await send(alice, '/sms/single', { recipient: '919812300003', senderName: 'HERALD', body: 'Your code is 42' });
      assert.equal((await inbound('919812300003'))?.accountId, alice.account.row.id);
      api!.clock.advance(120_000);
      await api!.drain();
      assert.equal((await bob.get(`/sms/${later}`)).json().recipients[0].status, 'Delivered');
      assert.equal((await inbound('919812300003'))?.accountId, bob.account.row.id);
      assert.equal((await mo(alice, { from: '919812300002', to: 'HERALD', text: 'who?' })).statusCode, 422);
      assert.equal((await mo(bob, { from: '919812300002', to: 'HERALD', text: 'who?' })).statusCode, 201);
      // A message that was never sent (suppressed, NotSent) routes nothing.
      await alice.post('/sms/suppressions', { number: '919812300005' });
      await send(alice, '/sms/batch', {
        recipients: [{ mobileNo: '919812300005' }],
        senderName: 'HERALD',
        body: 'Sale',
      });
      assert.equal(await inbound('919812300005'), null);
      const [post] = await posted();
      assert.deepEqual(
        post.data.map((e) => [e.from, e.to, e.text]),
        [
          ['919812300002', 'HERALD', 'thanks'],
          ['919812300003', 'HERALD', 'thanks'],
        ],
      );
    },
  );

  it(
    'STOP suppresses the number for that account only and turns ' + 'its contacts’ mobileOptIn off; START undoes it',
    async () => {
      await start();
      await addSenderName(alice, NUMBER);
      const handset = { mobileCountryCode: '91', mobileNumber: '9812300006', mobileOptIn: true };
      const mine = await alice.upsert([
        { ...handset, email: 'one@example.com' },
        { ...handset, email: 'two@example.com' },
      ]);
      const theirs = await bob.upsert([handset]);

      const stop = await mo(alice, { from: '919812300006', to: NUMBER, text: '  stop ' });
      assert.deepEqual([stop.statusCode, stop.json().keyword], [201, 'stop']);
      assert.deepEqual(await suppressions(alice), [['919812300006', 'STOP reply']]);
      for (const id of mine.inserted.contactIds) assert.equal((await alice.contact(id)).mobileOptIn, false);
      const single = await alice.post('/sms/single', { recipient: '919812300006', senderName: 'HERALD', body: 'code' });
      assert.equal(single.statusCode, 422);
      assert.match(single.json().errors[0].message, /suppressed \(STOP reply\)/);
      const batch = await send(alice, '/sms/batch', {
        recipients: [{ mobileNo: '919812300006' }, { mobileNo: '919812300007' }],
        senderName: 'HERALD',
        body: 'Sale',
      });
      assert.deepEqual((await alice.get(`/sms/${batch}`)).json().totals, { Delivered: 1, NotSent: 1 });

      // Bob's standing with the handset is his own.
      assert.deepEqual(await suppressions(bob), []);
      assert.equal((await bob.contact(theirs.inserted.contactIds[0])).mobileOptIn, true);
      await send(bob, '/sms/single', { recipient: '919812300006', senderName: 'HERALD', body: 'hi' });

      // A STOP from a number no contact holds suppresses it all the same.
      assert.equal((await mo(alice, { from: '919812300008', to: NUMBER, text: 'UNSUBSCRIBE' })).statusCode, 201);
      assert.deepEqual(
        (await suppressions(alice)).map(([number]: string[]) => number),
        ['919812300006', '919812300008'],
      );

      const undo = await mo(alice, { from: '919812300006', to: NUMBER, text: 'Start' });
      assert.equal(undo.json().keyword, 'start');
      assert.deepEqual(
        (await suppressions(alice)).map(([number]: string[]) => number),
        ['919812300008'],
      );
      for (const id of mine.inserted.contactIds) assert.equal((await alice.contact(id)).mobileOptIn, true);
      assert.equal(
        (await alice.post('/sms/single', { recipient: '919812300006', senderName: 'HERALD', body: 'code' })).statusCode,
        202,
      );

      // START lifts only a STOP: a suppression added by hand stays, and a YES to nothing is only a message.
      await alice.post('/sms/suppressions', { number: '919812300010', reason: 'complained' });
      assert.equal((await mo(alice, { from: '919812300010', to: NUMBER, text: 'YES' })).json().keyword, null);
      assert.deepEqual(await suppressions(alice), [
        ['919812300008', 'STOP reply'],
        ['919812300010', 'complained'],
      ]);
      // Every one of them is posted, the words included.
      assert.deepEqual(
        (await posted()).flatMap((post) => post.data.map((e) => e.text)),
        ['  stop ', 'UNSUBSCRIBE', 'Start', 'YES'],
      );
    },
  );

  it('reads a STOP through what an SMSC or a handset adds around it, and no word split in two', async () => {
    await start();
    await addSenderName(alice, NUMBER);
    // A NUL an SMSC counted in (read as U+FFFD), a zero-width space, a right-to-left mark, full width.
    const texts = ['STOP\uFFFD', '\u200BStop', 'stop\u200F', '\uFF33\uFF34\uFF2F\uFF30', 'ST OP'];
    const keywords = [];
    for (const [i, text] of texts.entries()) {
      const from = `9198123001${String(i).padStart(2, '0')}`;
      keywords.push(
        (await receiveInboundSms(api!.t.ctx.database, api!.clock, { from, to: NUMBER, text, at: 0 }, shared))?.keyword,
      );
    }
    assert.deepEqual(keywords, ['stop', 'stop', 'stop', 'stop', null]);
  });

  it('takes a STOP after a contact batch being applied, which writes back the opt-in it read', async () => {
    await start();
    await addSenderName(alice, NUMBER);
    const [id] = (await alice.upsert([{ mobileCountryCode: '91', mobileNumber: '9812300020', mobileOptIn: true }]))
      .inserted.contactIds;
    const { db } = api!.t.ctx;
    const writeBack = Promise.withResolvers<void>();
    // A batch's transaction: the account's contacts held, the contact read, its opt-in written back later.
    const batch = db.transaction().execute(async (trx) => {
      await lockAccountContacts(trx, dialect, alice.account.row.id);
      const read = await trx
        .selectFrom('contacts')
        .select('mobile_opt_in')
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
      await writeBack.promise;
      await trx.updateTable('contacts').set({ mobile_opt_in: read.mobile_opt_in }).where('id', '=', id).execute();
    });
    let settled = false;
    const stop = receiveInboundSms(
      api!.t.ctx.database,
      api!.clock,
      {
        from: '919812300020',
        to: NUMBER,
        text: 'STOP',
        at: api!.clock.now(),
      },
      shared,
    ).finally(() => (settled = true));
    if (dialect === 'postgres') await waitForLockWait(db, 'the STOP to wait for the batch', () => settled);
    writeBack.resolve();
    await batch;
    assert.equal((await stop)?.keyword, 'stop');
    assert.equal((await alice.contact(id)).mobileOptIn, false);
  });

  it('gives a numeric sender name to one account only; alphanumeric names stay shareable', async () => {
    await start();
    assert.equal((await addSenderName(alice, NUMBER)).statusCode, 201);
    assert.equal((await addSenderName(alice, NUMBER)).statusCode, 201);
    const taken = await addSenderName(bob, NUMBER);
    assert.equal(taken.statusCode, 409);
    assert.deepEqual(
      taken.json().errors.map((e: { field: string }) => e.field),
      ['name'],
    );
    assert.equal((await addSenderName(bob, 'SHOP')).statusCode, 201);
    assert.equal((await addSenderName(alice, 'SHOP')).statusCode, 201);
    const names = await api!.t.app.inject({
      method: 'GET',
      url: `/admin/accounts/${bob.account.row.id}/sender-names`,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    });
    assert.deepEqual(names.json().senderNames, ['SHOP']);
  });

  it('keeps a numeric default sender name out of every account: replies go to the last sender', async () => {
    const shared = '15551234567';
    await start({ DEFAULT_SENDER_NAME: shared });
    const refused = await addSenderName(alice, shared);
    assert.equal(refused.statusCode, 409, refused.body);
    // Registered to Alice before it became the default: it is still not hers.
    await api!.t.ctx.db
      .insertInto('sender_names')
      .values({ account_id: alice.account.row.id, name: shared, created_at: api!.clock.now() })
      .execute();
    await send(bob, '/sms/single', { recipient: '919811112222', senderName: shared, body: 'Your order shipped' });
    const stop = await mo(bob, { from: '919811112222', to: shared, text: 'STOP' });
    assert.equal(stop.statusCode, 201, stop.body);
    assert.equal(stop.json().keyword, 'stop');
    assert.equal((await mo(alice, { from: '919811112222', to: shared, text: 'STOP' })).statusCode, 422);
    assert.deepEqual(
      (await suppressions(bob)).map(([number]: string[]) => number),
      ['919811112222'],
    );
    assert.deepEqual(await suppressions(alice), []);
  });

  it('simulates no message from a handset once a connection over SMPP is added beside the sandbox', async () => {
    await start({}, false);
    await addSenderName(alice, NUMBER);
    assert.equal((await mo(alice, { from: '919812300021', to: NUMBER, text: 'STOP' })).statusCode, 201);
    const admin = (payload: object) =>
      api!.t.app.inject({
        method: 'POST',
        url: '/admin/smsc',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
        payload,
      });
    assert.equal((await admin({ name: 'lab', url: 'sandbox:' })).statusCode, 201);
    assert.equal((await mo(alice, { from: '919812300022', to: NUMBER, text: 'hello' })).statusCode, 201);
    assert.equal((await admin({ name: 'uk', url: 'smpp://herald:secret@127.0.0.1:2775' })).statusCode, 201);
    const lifted = await mo(alice, { from: '919812300021', to: NUMBER, text: 'START' });
    assert.equal(lifted.statusCode, 409, lifted.body);
    assert.match(lifted.json().message, /needs the sandbox transport/);
    assert.deepEqual(await suppressions(alice), [['919812300021', 'STOP reply']], 'the STOP stands');
  });

  it('takes inboundSmsWebhookUrl as an http(s) URL or null, refusing other schemes and private addresses', async () => {
    await start({ WEBHOOK_ALLOW_PRIVATE: 'false' }, false);
    assert.equal((await alice.get('/account')).json().inboundSmsWebhookUrl, null);
    assert.equal((await patchAccount(alice, { inboundSmsWebhookUrl: receiver.url })).statusCode, 422);
    assert.equal((await patchAccount(alice, { inboundSmsWebhookUrl: 'ftp://example.com/x' })).statusCode, 400);
    const internal = await patchAccount(alice, { inboundSmsWebhookUrl: 'http://10.0.0.1/hooks' });
    assert.equal(internal.statusCode, 422);
    assert.deepEqual(
      internal.json().errors.map((e: { field: string }) => e.field),
      ['inboundSmsWebhookUrl'],
    );
    assert.equal(
      (await patchAccount(alice, { inboundSmsWebhookUrl: 'https://93.184.215.14/hooks' })).json().inboundSmsWebhookUrl,
      'https://93.184.215.14/hooks',
    );
    assert.equal((await patchAccount(alice, {})).statusCode, 400);
  });

  it(
    'receives MO over SMPP from the simulator: a STOP in GSM-7 and a UCS-2 reply posted, an unroutable one ' +
      'answered and dropped',
    async () => {
      smsc = await startSmsc({ systemId: 'herald', password: 'secret' });
      await start({ SMS_TRANSPORT: `smpp://herald:secret@127.0.0.1:${smsc.port}` });
      await addSenderName(alice, NUMBER);
      // The sandbox's simulated MO says what it needs rather than that it does not exist.
      const simulated = await mo(alice, { from: '919812300011', to: NUMBER, text: 'STOP' });
      assert.equal(simulated.statusCode, 409, simulated.body);
      assert.match(
        simulated.json().message,
        /needs the sandbox transport \(SMS_TRANSPORT=sandbox:, and no connection over/,
      );
      assert.equal(
        (await mo(alice, { from: 'a number?', to: NUMBER, text: 'STOP' })).statusCode,
        400,
        'bad input first',
      );
      const control = (body: object) =>
        fetch(`http://127.0.0.1:${smsc!.httpPort}/mo`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
      // Herald binds at its worker's start; the simulator refuses an MO until a bind can take it.
      await waitFor('a bind to receive MO', async () =>
        (await control({ from: '919812300011', to: NUMBER, text: 'STOP' })).status === 202 ? true : undefined,
      );
      assert.equal((await control({ from: '919812300011', to: NUMBER, text: 'Merci, à demain 日本' })).status, 202);
      assert.equal((await control({ from: '919812300012', to: '447700900999', text: 'wrong number' })).status, 202);
      await waitFor('the MO answered', async () => (smsc!.stats().deliverSm.acknowledged === 3 ? true : undefined));
      assert.equal(smsc.stats().deliverSm.refused, 0);
      assert.deepEqual(await suppressions(alice), [['919812300011', 'STOP reply']]);
      const [post] = await posted();
      // Each deliver_sm is its own transaction: on PostgreSQL the two may commit in either order.
      assert.deepEqual(post.data.map((e) => [e.from, e.to, e.text]).sort(), [
        ['919812300011', NUMBER, 'Merci, à demain 日本'],
        ['919812300011', NUMBER, 'STOP'],
      ]);
      assert.equal((await api!.t.ctx.db.selectFrom('sms_inbound').selectAll().execute()).length, 2);
    },
  );
});
