import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { ManualClock } from '../../src/clock.ts';
import { forEachDatabase } from '../support/databases.ts';
import { startReceiver, type Receiver } from '../webhooks/support.ts';
import { startApiTest, type ApiClient, type ApiTest } from '../support/client.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

interface SandboxMessage {
  queueId: string;
  messageId: string;
  recipient: string;
  senderName: string;
  part: number;
  parts: number;
  encoding: string;
  text: string;
}

forEachDatabase((dialect) => {
  let api: ApiTest;
  let alice: ApiClient;
  let receiver: Receiver;
  beforeEach(async () => {
    // Standard Webhooks verifiers check webhook-timestamp against the real time.
    api = await startApiTest(dialect, { clock: new ManualClock(Date.now()) });
    alice = await api.client();
    receiver = await startReceiver();
  });
  afterEach(async () => {
    await receiver.close();
    await api.close();
  });

  const sandbox = async (client: ApiClient, recipient?: string) =>
    (await client.get(`/sandbox/sms${recipient ? `?recipient=${recipient}` : ''}`)).json().messages as SandboxMessage[];
  const send = async (client: ApiClient, path: '/sms/single' | '/sms/batch', body: object) => {
    const response = await client.post(path, body);
    assert.equal(response.statusCode, 202, response.body);
    await api.drain();
    return response.json().data.QueueId as string;
  };
  const secret = async (client: ApiClient) => (await client.get('/webhooks/secret')).json().secret as string;

  it(
    'accepts /sms/single with exactly SPEC §2.5, submits it to ' + 'the sandbox with its tags, and reads it back',
    async () => {
      const response = await alice.post('/sms/single', {
        recipient: '919812345678',
        senderName: 'HERALD',
        body: 'Your code is [code]',
        personalizationSubstitutionTags: [{ tagName: '[code]', tagValue: '482913' }],
      });
      assert.equal(response.statusCode, 202, response.body);
      const body = response.json();
      assert.deepEqual(Object.keys(body).sort(), ['data', 'message', 'status']);
      assert.equal(body.status, 'Success');
      assert.match(body.data.QueueId, UUID);
      assert.equal(body.data.QueuedTimestamp, api.clock.now());
      await api.drain();

      const [message] = await sandbox(alice);
      assert.deepEqual(
        [message.recipient, message.senderName, message.text, message.parts, message.encoding],
        ['919812345678', 'HERALD', 'Your code is 482913', 1, 'GSM-7'],
      );
      const read = (await alice.get(`/sms/${body.data.QueueId}`)).json();
      assert.equal(read.status, 'Completed');
      assert.deepEqual(read.totals, { Delivered: 1 });
      assert.equal(read.partsBilled, 1);
      const [recipient] = read.recipients;
      assert.deepEqual(
        [recipient.recipient, recipient.status, recipient.messageId, recipient.parts, recipient.encoding],
        ['919812345678', 'Delivered', message.messageId, 1, 'GSM-7'],
      );
      // The sandbox reports each part delivered, as an operator's receipt would.
      assert.deepEqual(
        recipient.history.map((h: { status: string }) => h.status),
        ['Queued', 'Submitted', 'Delivered'],
      );
      assert.deepEqual(recipient.partStatus, [
        { part: 1, operatorMessageId: `${message.messageId}/1`, status: 'Delivered' },
      ]);
    },
  );

  it(
    'sends a batch to its recipients and lists: one message per number, the request’s tags over the contact’s, ' +
      'consent obeyed',
    async () => {
      await alice.createProperty('firstName');
      const list = await alice.createList('Customers');
      const other = await alice.createList('Prospects');
      const contact = (mobileNumber: string, firstName: string, mobileOptIn: boolean) => ({
        mobileCountryCode: '91',
        mobileNumber,
        mobileOptIn,
        propertyfields: [{ propertyname: 'firstName', propertyvalue: firstName }],
      });
      await alice.upsert(
        [
          contact('9812300001', 'Asha', true),
          contact('9812300002', 'Bina', true),
          contact('9812300003', 'Chetan', false),
        ],
        { listId: list },
      );
      // The same number in a second list, updated later: its data is the one used (rule 4).
      await alice.upsert([contact('9812300002', 'Bina', true)], { listId: other });
      await alice.upsert(
        [
          {
            mobileCountryCode: '91',
            mobileNumber: '9812300002',
            mobileOptIn: true,
            email: 'bina@example.com',
            propertyfields: [{ propertyname: 'firstName', propertyvalue: 'Binita' }],
          },
        ],
        { listId: other },
      );

      const queueId = await send(alice, '/sms/batch', {
        listId: [list, other, list],
        recipients: [
          {
            mobileNo: '919812300001',
            personalizationSubstitutionTags: [{ tagName: '[firstName]', tagValue: 'Dr Asha' }],
          },
          { mobileNo: '919812300009' },
        ],
        senderName: 'HERALD',
        body: 'Hello [firstName], your order shipped.',
        webHookUrl: receiver.url,
      });
      const texts = new Map((await sandbox(alice)).map((m) => [m.recipient, m.text]));
      assert.deepEqual(Object.fromEntries(texts), {
        '919812300001': 'Hello Dr Asha, your order shipped.',
        '919812300002': 'Hello Binita, your order shipped.',
        '919812300009': 'Hello , your order shipped.',
      });
      const read = (await alice.get(`/sms/${queueId}`)).json();
      assert.deepEqual(read.totals, { Delivered: 3, NotSent: 1 });
      const notSent = read.recipients.find((r: { recipient: string }) => r.recipient === '919812300003');
      assert.equal(notSent.status, 'NotSent');
      assert.match(notSent.reason, /consent/);

      // The status events are gathered into one signed post.
      api.clock.advance(1000);
      await api.drain();
      assert.equal(receiver.received.length, 1);
      const post = receiver.received[0];
      const payload = new Webhook(await secret(alice)).verify(post.body, post.headers as Record<string, string>) as {
        type: string;
        data: Array<{ queueId: string; recipient: string; status: string; parts: number }>;
      };
      assert.equal(payload.type, 'sms.status');
      assert.deepEqual(payload.data.map((e) => [e.queueId, e.recipient, e.status, e.parts]).sort(), [
        [queueId, '919812300001', 'Delivered', 1],
        [queueId, '919812300001', 'Submitted', 1],
        [queueId, '919812300002', 'Delivered', 1],
        [queueId, '919812300002', 'Submitted', 1],
        [queueId, '919812300003', 'Failed', null],
        [queueId, '919812300009', 'Delivered', 1],
        [queueId, '919812300009', 'Submitted', 1],
      ]);
    },
  );

  it('posts a recipient not sent for consent or suppression as Failed, not_sent; the read keeps NotSent', async () => {
    await alice.upsert([{ mobileCountryCode: '91', mobileNumber: '9812300003', mobileOptIn: false }]);
    await alice.post('/sms/suppressions', { number: '919812300004', reason: 'replied STOP' });
    const scheduleDateTime = new Date(api.clock.now() + 60_000).toISOString();
    const recipients = ['919812300003', '919812300004', '919812300005'].map((mobileNo) => ({ mobileNo }));
    const sms = { senderName: 'HERALD', body: 'sale', webHookUrl: receiver.url };
    const batch = await send(alice, '/sms/batch', { ...sms, recipients });
    // A scheduled single is settled again when its time comes, as a batch is.
    const single = await send(alice, '/sms/single', { ...sms, recipient: '919812300006', scheduleDateTime });
    await alice.post('/sms/suppressions', { number: '919812300006', reason: 'replied STOP' });
    api.clock.advance(60_000);
    await api.drain();
    api.clock.advance(1000);
    await api.drain();

    const read = (await alice.get(`/sms/${batch}`)).json();
    const shown = read.recipients.map((r: Record<string, unknown>) => [r.recipient, r.status, r.reason, r.errorCode]);
    assert.deepEqual(shown, [
      ['919812300003', 'NotSent', 'no consent: a contact with this address has not opted in', null],
      ['919812300004', 'NotSent', 'suppressed: replied STOP', null],
      ['919812300005', 'Delivered', null, null],
    ]);
    type Event = { queueId: string; recipient: string; status: string; at?: string };
    const events = receiver.received.flatMap((post) => JSON.parse(post.body).data as Event[]);
    const failed = events.filter((e) => e.status === 'Failed').map(({ at: _at, ...e }) => e);
    const notSent = (queueId: string, recipient: string, reason: string) => ({
      queueId,
      messageId: null,
      recipient,
      status: 'Failed',
      errorCode: 'not_sent',
      error: `not sent: ${reason}`,
      parts: null,
    });
    assert.deepEqual(
      new Set(failed),
      new Set([
        notSent(batch, '919812300003', 'no consent: a contact with this address has not opted in'),
        notSent(batch, '919812300004', 'suppressed: replied STOP'),
        notSent(single, '919812300006', 'suppressed: replied STOP'),
      ]),
    );
    const others = events.filter((e) => e.recipient !== '919812300005');
    assert.deepEqual(
      others.map((e) => e.status),
      ['Failed', 'Failed', 'Failed'],
      'nothing else of them is posted',
    );
    assert.equal((await alice.get(`/sms/${single}`)).json().recipients[0].status, 'NotSent');
  });

  it('splits a long text into parts, and bills them', async () => {
    const queueId = await send(alice, '/sms/single', {
      recipient: '919812345678',
      senderName: 'HERALD',
      body: 'x'.repeat(161),
    });
    const parts = await sandbox(alice);
    assert.deepEqual(parts.map((p) => [p.part, p.parts, p.text.length]).sort(), [
      [1, 2, 153],
      [2, 2, 8],
    ]);
    assert.equal((await alice.get(`/sms/${queueId}`)).json().partsBilled, 2);
  });

  it('fails alone a recipient whose tags make its text longer than a message can be', async () => {
    await alice.createProperty('firstName');
    const named = (mobileNumber: string, firstName: string) => ({
      mobileCountryCode: '91',
      mobileNumber,
      mobileOptIn: true,
      propertyfields: [{ propertyname: 'firstName', propertyvalue: firstName }],
    });
    // 'ë' makes the text UCS-2: 17,103 characters take 256 parts, one more than a message has.
    await alice.upsert([named('9812300001', 'Al'), named('9812300002', 'Zoë')]);
    const [allContacts] = (await alice.get('/lists')).json().lists;
    const queueId = await send(alice, '/sms/batch', {
      senderName: 'HERALD',
      body: `${'a'.repeat(17_100)}[firstName]`,
      listId: [allContacts.listId],
    });
    const sent = (await alice.get(`/sms/${queueId}`)).json();
    assert.equal(sent.status, 'Completed');
    const [al, zoe] = (sent.recipients as Array<{ recipient: string; status: string; error: string | null }>).toSorted(
      (a, b) => a.recipient.localeCompare(b.recipient),
    );
    assert.equal(al.status, 'Delivered');
    assert.equal(zoe.status, 'Failed');
    assert.match(zoe.error ?? '', /more than the 255 SMS parts/);
    assert.deepEqual([...new Set((await sandbox(alice)).map((p) => p.recipient))], ['919812300001']);
  });

  it('fails alone a recipient whose tags leave its text empty, and bills it nothing', async () => {
    const queueId = await send(alice, '/sms/batch', {
      senderName: 'HERALD',
      body: '[name]',
      recipients: [
        { mobileNo: '919812300001', personalizationSubstitutionTags: [{ tagName: '[name]', tagValue: 'Al' }] },
        { mobileNo: '919812300002', personalizationSubstitutionTags: [{ tagName: '[name]', tagValue: ' ' }] },
        { mobileNo: '919812300003' },
      ],
    });
    const sent = (await alice.get(`/sms/${queueId}`)).json();
    const byNumber = Object.fromEntries(
      (sent.recipients as Array<{ recipient: string; status: string; error: string | null }>).map((r) => [
        r.recipient,
        [r.status, r.error],
      ]),
    );
    assert.deepEqual(byNumber, {
      '919812300001': ['Delivered', null],
      '919812300002': ['Failed', 'not sent: its text, tags filled, is empty'],
      '919812300003': ['Failed', 'not sent: its text, tags filled, is empty'],
    });
    assert.equal(sent.partsBilled, 1);
    assert.deepEqual([...new Set((await sandbox(alice)).map((p) => p.recipient))], ['919812300001']);
  });

  it(
    'bills the parts of a message the operator took though its ' + 'receipt failed, and not those of one it refused',
    async () => {
      await api.close();
      api = await startApiTest(dialect, {
        clock: new ManualClock(Date.now()),
        env: { SMS_TRANSPORT: 'sandbox:?fail=0002$' },
      });
      alice = await api.client();
      const queueId = await send(alice, '/sms/batch', {
        senderName: 'HERALD',
        body: 'x'.repeat(161),
        recipients: ['919812300001', '919812300002'].map((mobileNo) => ({ mobileNo })),
      });
      const statuses = async () =>
        Object.fromEntries(
          (await alice.get(`/sms/${queueId}`))
            .json()
            .recipients.map((r: { recipient: string; status: string }) => [r.recipient, r.status]),
        );
      assert.deepEqual(await statuses(), { '919812300001': 'Delivered', '919812300002': 'Failed' });
      // As an UNDELIV receipt leaves it (sms/receipts.ts): Failed after the operator took it.
      const { id } = await api.t.ctx.db
        .selectFrom('send_recipients')
        .select('id')
        .where('send_id', '=', queueId)
        .where('address', '=', '919812300001')
        .executeTakeFirstOrThrow();
      await api.t.ctx.db.updateTable('send_recipients').set({ status: 'Failed' }).where('id', '=', id).execute();
      await api.t.ctx.db
        .insertInto('recipient_history')
        .values({ recipient_id: id, status: 'Failed', at: api.clock.now() })
        .execute();
      assert.deepEqual(await statuses(), { '919812300001': 'Failed', '919812300002': 'Failed' });
      assert.equal((await alice.get(`/sms/${queueId}`)).json().partsBilled, 2);
    },
  );

  it('answers /sms/single to a number whose contact has not consented with 422, and queues nothing', async () => {
    await alice.upsert([{ mobileCountryCode: '91', mobileNumber: '9812300003', mobileOptIn: false }]);
    const response = await alice.post('/sms/single', {
      recipient: '919812300003',
      senderName: 'HERALD',
      body: 'code 1',
    });
    assert.equal(response.statusCode, 422);
    assert.deepEqual(
      response.json().errors.map((e: { field: string }) => e.field),
      ['recipient'],
    );
    await api.drain();
    assert.deepEqual(await sandbox(alice), []);
  });

  it('keeps accounts apart: another account’s send, sandbox and lists are not there', async () => {
    const bob = await api.client();
    const list = await alice.createList('Mine');
    const queueId = await send(alice, '/sms/single', { recipient: '919812345678', senderName: 'HERALD', body: 'hi' });
    assert.equal((await bob.get(`/sms/${queueId}`)).statusCode, 404);
    assert.deepEqual(await sandbox(bob), []);
    const intoHerList = await bob.post('/sms/batch', { listId: [list], senderName: 'HERALD', body: 'hi' });
    assert.equal(intoHerList.statusCode, 422);
  });

  it('pages GET /sandbox/sms newest first with a cursor that shows another account nothing', async () => {
    const bob = await api.client();
    const recipients = ['919812300001', '919812300002', '919812300003'].map((mobileNo) => ({ mobileNo }));
    await send(alice, '/sms/batch', { recipients, senderName: 'HERALD', body: 'hi' });
    const page = async (client: ApiClient, query: string) => {
      const response = await client.get(`/sandbox/sms?${query}`);
      assert.equal(response.statusCode, 200, response.body);
      return response.json() as { messages: SandboxMessage[]; nextCursor: string | null };
    };
    const all = (await page(alice, '')).messages.map((m) => m.recipient);
    assert.equal(all.length, 3);
    const first = await page(alice, 'limit=2');
    assert.deepEqual(
      first.messages.map((m) => m.recipient),
      all.slice(0, 2),
    );
    const second = await page(alice, `limit=2&cursor=${first.nextCursor}`);
    assert.deepEqual([second.messages.map((m) => m.recipient), second.nextCursor], [all.slice(2), null]);
    assert.deepEqual(await page(bob, `cursor=${first.nextCursor}`), { messages: [], nextCursor: null });
    assert.equal((await alice.get('/sandbox/sms?cursor=x')).statusCode, 400);
  });

  it('queues a request sent again with its Idempotency-Key once', async () => {
    const body = { recipient: '919812345678', senderName: 'HERALD', body: 'once' };
    const post = () =>
      api.t.app.inject({
        method: 'POST',
        url: '/sms/single',
        headers: { authorization: `Bearer ${alice.token}`, 'idempotency-key': 'otp-1' },
        payload: body,
      });
    const [first, again] = [await post(), await post()];
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.deepEqual(again.json(), first.json());
    await api.drain();
    assert.equal((await sandbox(alice)).length, 1);
  });

  it('sends a scheduled SMS at its time, not before, read in the account’s offset when the time has none', async () => {
    // The test account's offset is UTC+00:00 unless it says otherwise.
    const at = new Date(Math.ceil(api.clock.now() / 1000) * 1000 + 3_600_000);
    const local = at.toISOString().slice(0, 19);
    const queueId = (
      await alice.post('/sms/single', {
        recipient: '919812345678',
        senderName: 'HERALD',
        body: 'later',
        scheduleDateTime: local,
      })
    ).json().data.QueueId;
    await api.drain();
    assert.deepEqual(await sandbox(alice), []);
    const waiting = (await alice.get(`/sms/${queueId}`)).json();
    assert.deepEqual(
      [waiting.status, waiting.scheduledAt, waiting.recipients[0].status],
      ['Scheduled', at.toISOString(), 'Scheduled'],
    );
    api.clock.advance(at.getTime() - api.clock.now() - 1);
    await api.drain();
    assert.deepEqual(await sandbox(alice), [], 'not a millisecond early');
    api.clock.advance(1);
    await api.drain();
    assert.equal((await sandbox(alice)).length, 1);
    assert.equal((await alice.get(`/sms/${queueId}`)).json().status, 'Completed');
  });

  it('cancels a send that has not started (204), and refuses once it has (409)', async () => {
    const bob = await api.client();
    const later = new Date(api.clock.now() + 60_000).toISOString();
    const queueId = (
      await alice.post('/sms/batch', {
        recipients: [{ mobileNo: '919812345678' }],
        senderName: 'HERALD',
        body: 'x',
        scheduleDateTime: later,
      })
    ).json().data.QueueId;
    const cancel = (client = alice, id = queueId) =>
      api.t.app.inject({ method: 'DELETE', url: `/sms/${id}`, headers: { authorization: `Bearer ${client.token}` } });
    assert.equal((await cancel(bob)).statusCode, 404);
    assert.equal((await cancel()).statusCode, 204);
    api.clock.advance(60_000);
    await api.drain();
    assert.deepEqual(await sandbox(alice), []);
    const read = (await alice.get(`/sms/${queueId}`)).json();
    assert.deepEqual([read.status, read.totals], ['Cancelled', { Cancelled: 1 }]);
    assert.equal((await cancel()).statusCode, 409);
    const sent = await send(alice, '/sms/single', { recipient: '919812345678', senderName: 'HERALD', body: 'now' });
    assert.equal((await cancel(alice, sent)).statusCode, 409);
  });

  it('reads Scheduled, Queued and Cancelled in a history from the send’s own times, and never posts them', async () => {
    const entry = (status: string, ms: number) => ({ status, at: new Date(ms).toISOString() });
    const createdAt = api.clock.now();
    const at = createdAt + 60_000;
    const recipients = [{ mobileNo: '919812345678' }];
    const sms = { recipients, senderName: 'HERALD', body: 'x', webHookUrl: receiver.url };
    const later = { ...sms, scheduleDateTime: new Date(at).toISOString() };
    const scheduled = await alice.accept('/sms/batch', later);
    const cancelled = await alice.accept('/sms/batch', later);
    const immediate = await alice.accept('/sms/batch', sms);
    api.clock.advance(1000);
    for (const queueId of [cancelled, immediate]) {
      const headers = { authorization: `Bearer ${alice.token}` };
      assert.equal((await api.t.app.inject({ method: 'DELETE', url: `/sms/${queueId}`, headers })).statusCode, 204);
    }
    const history = async (queueId: string) => (await alice.get(`/sms/${queueId}`)).json().recipients[0].history;
    assert.deepEqual(await history(scheduled), [entry('Scheduled', createdAt)]);
    assert.deepEqual(await history(cancelled), [entry('Scheduled', createdAt), entry('Cancelled', createdAt + 1000)]);
    assert.deepEqual(await history(immediate), [entry('Queued', createdAt), entry('Cancelled', createdAt + 1000)]);

    api.clock.advance(59_000);
    await api.drain();
    api.clock.advance(1000);
    await api.drain();
    const sent = [entry('Scheduled', createdAt), entry('Queued', at), entry('Submitted', at), entry('Delivered', at)];
    assert.deepEqual(await history(scheduled), sent);
    type Event = { queueId: string; status: string };
    const events = receiver.received.flatMap((post) => JSON.parse(post.body).data as Event[]);
    assert.deepEqual(
      events.map((e) => [e.queueId, e.status]),
      [
        [scheduled, 'Submitted'],
        [scheduled, 'Delivered'],
      ],
    );
  });

  it(
    'never sends to a suppressed number: NotSent in a batch, 422 ' + 'for a single, until the suppression is removed',
    async () => {
      const bob = await api.client();
      const added = await alice.post('/sms/suppressions', { number: '919812300001', reason: 'replied STOP' });
      assert.equal(added.statusCode, 201);
      assert.deepEqual(Object.keys(added.json()).sort(), ['createdAt', 'number', 'reason']);
      const single = await alice.post('/sms/single', { recipient: '919812300001', senderName: 'HERALD', body: 'code' });
      assert.equal(single.statusCode, 422);
      assert.match(single.json().errors[0].message, /suppressed \(replied STOP\)/);
      const queueId = await send(alice, '/sms/batch', {
        recipients: [{ mobileNo: '919812300001' }, { mobileNo: '919812300002' }],
        senderName: 'HERALD',
        body: 'sale',
      });
      const read = (await alice.get(`/sms/${queueId}`)).json();
      assert.deepEqual(read.totals, { Delivered: 1, NotSent: 1 });
      assert.equal(read.recipients[0].reason, 'suppressed: replied STOP');
      // Another account's suppressions are its own.
      assert.deepEqual((await bob.get('/sms/suppressions')).json().suppressions, []);
      await send(bob, '/sms/single', { recipient: '919812300001', senderName: 'HERALD', body: 'hi' });
      assert.deepEqual(
        (await alice.get('/sms/suppressions')).json().suppressions.map((s: { number: string }) => s.number),
        ['919812300001'],
      );
      const remove = () =>
        api.t.app.inject({
          method: 'DELETE',
          url: '/sms/suppressions/919812300001',
          headers: { authorization: `Bearer ${alice.token}` },
        });
      assert.equal((await remove()).statusCode, 204);
      assert.equal((await remove()).statusCode, 404);
      assert.equal(
        (await alice.post('/sms/single', { recipient: '919812300001', senderName: 'HERALD', body: 'code' })).statusCode,
        202,
      );
    },
  );
});
