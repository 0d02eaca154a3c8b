import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import { generateKey, Keyring, open } from '../../src/sealed.ts';
import { createWorker } from '../../src/server/worker.ts';
import { sandboxTextPlace } from '../../src/sms/sealing.ts';
import { forEachDatabase } from '../support/databases.ts';
import { startReceiver, type Receiver } from '../webhooks/support.ts';
import { startApiTest, type ApiClient, type ApiTest } from '../support/client.ts';
import { foundInStorage } from '../support/storage.ts';

// Distinctive: the passcode comes from a tag, the words around it from the body.
const CODE = '739184';
const BODY_WORDS = 'Zebra passcode';
// Sent in clear beside them: the searches below find it, so they can find the others.
const CLEAR_CODE = '284615';
const CLEAR_WORDS = 'Walrus reminder';

interface SandboxMessage {
  queueId: string;
  messageId: string;
  recipient: string;
  part: number;
  text: string | null;
  encrypted: boolean;
}

forEachDatabase((dialect) => {
  let api: ApiTest;
  let alice: ApiClient;
  let receiver: Receiver;
  let logs: string[];
  beforeEach(async () => {
    logs = [];
    // Every level, so that anything the app would ever log of a request or a job is seen.
    const logger = { level: 'trace', stream: { write: (line: string) => void logs.push(line) } };
    api = await startApiTest(dialect, { clock: new ManualClock(Date.now()), logger });
    alice = await api.client();
    receiver = await startReceiver();
  });
  afterEach(async () => {
    await receiver.close();
    await api.close();
  });

  const sandbox = async (client: ApiClient) => (await client.get('/sandbox/sms')).json().messages as SandboxMessage[];
  const post = (path: string, body: object, idempotencyKey?: string) =>
    api.t.app.inject({
      method: 'POST',
      url: path,
      headers: {
        authorization: `Bearer ${alice.token}`,
        ...(idempotencyKey ? { 'idempotency-key': idempotencyKey } : {}),
      },
      payload: body,
    });
  const passcode = { senderName: 'HERALD', body: `${BODY_WORDS}: [code]`, isBodyEncrypted: true };
  const codeTag = [{ tagName: '[code]', tagValue: CODE }];

  it(
    'keeps an encrypted body, its tag values and its rendered texts out of the database, the logs and the ' +
      'webhooks',
    async () => {
      const single = {
        ...passcode,
        recipient: '919812345678',
        personalizationSubstitutionTags: codeTag,
        webHookUrl: receiver.url,
      };
      const accepted = await post('/sms/single', single, 'passcode-1');
      assert.equal(accepted.statusCode, 202, accepted.body);
      const replayed = await post('/sms/single', single, 'passcode-1');
      assert.equal(replayed.headers['idempotent-replayed'], 'true');
      assert.deepEqual(replayed.json(), accepted.json());
      const batch = await post('/sms/batch', {
        ...passcode,
        recipients: [
          { mobileNo: '919812300001', personalizationSubstitutionTags: codeTag },
          { mobileNo: '919812300002' },
        ],
        webHookUrl: receiver.url,
      });
      assert.equal(batch.statusCode, 202, batch.body);
      const clear = await post('/sms/single', {
        recipient: '919812399999',
        senderName: 'HERALD',
        body: `${CLEAR_WORDS}: [code]`,
        personalizationSubstitutionTags: [{ tagName: '[code]', tagValue: CLEAR_CODE }],
      });
      assert.equal(clear.statusCode, 202, clear.body);
      await api.drain();
      api.clock.advance(1000);
      await api.drain();

      const singleId = accepted.json().data.QueueId;
      const batchId = batch.json().data.QueueId;
      for (const queueId of [singleId, batchId]) {
        const read = (await alice.get(`/sms/${queueId}`)).json();
        assert.equal(read.status, 'Completed');
        assert.deepEqual(Object.keys(read.totals), ['Delivered']);
        assert.doesNotMatch(JSON.stringify(read), new RegExp(`${CODE}|${BODY_WORDS}`));
      }

      // The sandbox took each text in clear and kept it sealed; its reads show it redacted.
      const messages = await sandbox(alice);
      const sealed = messages.filter((m) => m.queueId === singleId || m.queueId === batchId);
      assert.deepEqual(sealed.map((m) => [m.recipient, m.text, m.encrypted]).sort(), [
        ['919812300001', null, true],
        ['919812300002', null, true],
        ['919812345678', null, true],
      ]);
      assert.deepEqual(
        messages.filter((m) => m.queueId === clear.json().data.QueueId).map((m) => [m.text, m.encrypted]),
        [[`${CLEAR_WORDS}: ${CLEAR_CODE}`, false]],
      );
      const records = await api.t.ctx.db
        .selectFrom('sandbox_sms')
        .select(['message_id', 'recipient', 'part', 'text'])
        .where('send_id', 'in', [singleId, batchId])
        .execute();
      const opened = Object.fromEntries(
        records.map((r) => [
          r.recipient,
          open(api.t.ctx.encryptionKey, r.text, sandboxTextPlace(r.message_id, r.part)),
        ]),
      );
      assert.deepEqual(opened, {
        '919812345678': `${BODY_WORDS}: ${CODE}`,
        '919812300001': `${BODY_WORDS}: ${CODE}`,
        '919812300002': `${BODY_WORDS}: `,
      });

      // Statuses were posted, and they carry no text.
      assert.ok(receiver.received.length > 0, 'the status webhooks were posted');
      const posted = receiver.received.map((r) => r.body).join('\n');
      assert.match(posted, /"Delivered"/);
      assert.doesNotMatch(posted, new RegExp(`${CODE}|${BODY_WORDS}`));

      const found = await foundInStorage(api, dialect, [CODE, BODY_WORDS, CLEAR_CODE, CLEAR_WORDS]);
      assert.deepEqual([found[CODE], found[BODY_WORDS]], [[], []], 'the encrypted send is in clear nowhere');
      assert.ok(
        found[CLEAR_CODE].length > 0 && found[CLEAR_WORDS].length > 0,
        `the clear send is found: ${JSON.stringify(found)}`,
      );

      const logged = logs.join('');
      assert.match(logged, /"url":"\/sms\/single"/, 'requests were logged');
      assert.doesNotMatch(logged, new RegExp(`${CODE}|${BODY_WORDS}`));

      // Another account sees none of it.
      const bob = await api.client();
      assert.deepEqual(await sandbox(bob), []);
      assert.equal((await bob.get(`/sms/${singleId}`)).statusCode, 404);
    },
  );

  it('opens a sealed body only for its own send: moved to another, its job fails and names no secret', async () => {
    const first = await post('/sms/single', {
      ...passcode,
      recipient: '919812345678',
      personalizationSubstitutionTags: codeTag,
    });
    const second = await post('/sms/single', {
      ...passcode,
      recipient: '919812345679',
      personalizationSubstitutionTags: [{ tagName: '[code]', tagValue: '105722' }],
    });
    const [firstId, secondId] = [first.json().data.QueueId, second.json().data.QueueId];
    const db = api.t.ctx.db;
    const { content } = await db
      .selectFrom('sends')
      .select('content')
      .where('id', '=', firstId)
      .executeTakeFirstOrThrow();
    await db.updateTable('sends').set({ content }).where('id', '=', secondId).execute();
    await api.drain();

    assert.deepEqual(
      (await sandbox(alice)).map((m) => m.queueId),
      [firstId],
    );
    const job = await db
      .selectFrom('jobs')
      .select(['state', 'last_error'])
      .where('idempotency_key', '=', `sms.send:${secondId}`)
      .executeTakeFirstOrThrow();
    assert.equal(job.state, 'ready', 'tried again later: another worker may hold the right key');
    assert.match(job.last_error ?? '', /^a sealed value of sends\.content does not open/);
    const logged = logs.join('');
    assert.match(logged, /"msg":"job failed"/);
    assert.doesNotMatch(logged, new RegExp(`${CODE}|105722|${BODY_WORDS}`));
  });

  it(
    'sends, after ENCRYPTION_KEY is replaced, what was accepted sealed under the key it replaced, and replays its ' +
      'Idempotency-Key',
    async () => {
      const scheduled = {
        ...passcode,
        recipient: '919812345678',
        personalizationSubstitutionTags: codeTag,
        scheduleDateTime: new Date(api.clock.now() + 60_000).toISOString(),
      };
      const accepted = await post('/sms/single', scheduled, 'before-the-new-key');
      assert.equal(accepted.statusCode, 202, accepted.body);

      const replaced = api.t.ctx.encryptionKey;
      api.t.ctx.encryptionKey = new Keyring(generateKey(), replaced.all);
      const replayed = await post('/sms/single', scheduled, 'before-the-new-key');
      assert.equal(replayed.headers['idempotent-replayed'], 'true');
      assert.deepEqual(replayed.json(), accepted.json());

      api.clock.advance(60_000);
      const worker = createWorker(api.t.ctx);
      await worker.drain();
      await worker.stop();
      const [record] = await api.t.ctx.db.selectFrom('sandbox_sms').select(['message_id', 'part', 'text']).execute();
      assert.equal(
        open(api.t.ctx.encryptionKey, record.text!, sandboxTextPlace(record.message_id, record.part)),
        `${BODY_WORDS}: ${CODE}`,
      );
      assert.throws(
        () => open(replaced, record.text!, sandboxTextPlace(record.message_id, record.part)),
        'sealed again under the new key',
      );
    },
  );

  it('sends an encrypted text exactly as a clear one: tags from the contact, parts, encoding', async () => {
    await alice.createProperty('firstName');
    const list = await alice.createList('Customers');
    await alice.upsert(
      [
        {
          mobileCountryCode: '91',
          mobileNumber: '9812300005',
          mobileOptIn: true,
          propertyfields: [{ propertyname: 'firstName', propertyvalue: 'Asha' }],
        },
      ],
      { listId: list },
    );
    const body = `[firstName], your code is [code]. ${'ж'.repeat(70)}`;
    const response = await post('/sms/batch', {
      senderName: 'HERALD',
      body,
      isBodyEncrypted: true,
      listId: [list],
      recipients: [{ mobileNo: '919812300005', personalizationSubstitutionTags: codeTag }],
    });
    assert.equal(response.statusCode, 202, response.body);
    await api.drain();
    const read = (await alice.get(`/sms/${response.json().data.QueueId}`)).json();
    assert.deepEqual(
      read.recipients.map((r: { status: string; parts: number; encoding: string }) => [r.status, r.parts, r.encoding]),
      [['Delivered', 2, 'UCS-2']],
    );
    const records = await api.t.ctx.db
      .selectFrom('sandbox_sms')
      .select(['message_id', 'part', 'text'])
      .orderBy('part')
      .execute();
    const text = records
      .map((r) => open(api.t.ctx.encryptionKey, r.text, sandboxTextPlace(r.message_id, r.part)))
      .join('');
    assert.equal(text, `Asha, your code is ${CODE}. ${'ж'.repeat(70)}`);
  });
});
