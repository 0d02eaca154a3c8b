import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { sql } from 'kysely';
import { ManualClock } from '../../src/clock.ts';
import type { DialectName } from '../../src/db/database.ts';
import { erasedAddress, erasureKey } from '../../src/messaging/erased-identifiers.ts';
import { rotateJwtSecret } from '../../src/auth/signing-key.ts';
import { ConfigError } from '../../src/config.ts';
import { generateKey, Keyring } from '../../src/sealed.ts';
import { ADMIN_TOKEN, bearer, startTestApp } from '../support/app.ts';
import { startApiTest, type ApiClient, type ApiTest } from '../support/client.ts';
import { forEachDatabase } from '../support/databases.ts';
import { pgDump } from '../support/storage.ts';
import { watchPostgres } from '../support/postgres-wire.ts';
import { startReceiver, type Receiver } from '../webhooks/support.ts';
import { buildBatch } from '../email/support.ts';
import { recordTracking } from '../../src/email/record.ts';
import { Worker } from '../../src/queue/worker.ts';
import { SMS_SINGLE_KIND } from '../../src/sms/accept.ts';
import { applyReceipts } from '../../src/sms/receipts.ts';
import { smsSingleHandler } from '../../src/sms/single.ts';
import type { SmsTransport } from '../../src/sms/transport.ts';

// Erasure of one person (ARCHITECTURE.md, "Data rights and management"; docs/privacy.md).

const ADA_MOBILE = '447911123456';
const ADA_EMAIL = 'zebulon.ada@example.com';
const SECRET_TEXT = 'Your code is 48151623';
const REPLY = 'Zebulon replies from the handset';

/** A recipient's unsubscribe, confirmed (its one-click POST or its mailto), as recordTracking takes it. */
const unsubscribed = (recipientId: number, sendId: string, now: number) => ({
  recipientId,
  sendId,
  event: { kind: 'unsubscribe' as const },
  userAgent: null,
  head: false,
  confirmed: true,
  now,
});

/** Every row of every table, as text: what any read, search or export could show. */
async function everyRow(api: ApiTest, dialect: DialectName): Promise<string> {
  const db = api.t.ctx.db;
  const { rows: tables } =
    dialect === 'sqlite'
      ? await sql<{ name: string }>`select name from sqlite_master where type = 'table'
                                      and name not like 'sqlite_%'`.execute(db)
      : await sql<{ name: string }>`select table_name as name from information_schema.tables
                                     where table_schema = current_schema() and table_type = 'BASE TABLE'`.execute(db);
  let text = '';
  for (const { name } of tables) {
    const { rows } = await sql`select * from ${sql.table(name)}`.execute(db);
    text += JSON.stringify(rows, (_k, v) => (typeof v === 'bigint' ? String(v) : v));
  }
  return text;
}

forEachDatabase((dialect) => {
  let api: ApiTest;
  let alice: ApiClient;
  let bob: ApiClient;
  let receiver: Receiver;
  beforeEach(async () => {
    api = await startApiTest(dialect, {
      clock: new ManualClock(Date.UTC(2026, 2, 10, 12)),
      env: { SMS_TRANSPORT: 'sandbox:', EMAIL_TRANSPORT: 'sandbox:' },
    });
    alice = await api.client();
    bob = await api.client();
    receiver = await startReceiver();
  });
  afterEach(async () => {
    await api.close();
    await receiver.close();
  });

  const erase = async (client: ApiClient, person: object) => {
    const response = await client.post('/privacy/erasures', person);
    assert.equal(response.statusCode, 202, response.body);
    return response.json().erasureId as string;
  };
  const ada = async (client: ApiClient) =>
    (
      await client.upsert([
        {
          mobileCountryCode: '44',
          mobileNumber: '7911123456',
          email: ADA_EMAIL,
          mobileOptIn: true,
          emailOptIn: true,
          propertyfields: [{ propertyname: 'firstName', propertyvalue: 'Zebulon' }],
        },
        { mobileCountryCode: '44', mobileNumber: '7911000001', email: 'other@example.com', mobileOptIn: true },
      ])
    ).inserted.contactIds;

  it('keeps an erased person suppressed in a list send and its dry run, never sending the key', async () => {
    // Every parameter sent to PostgreSQL: its server's logs may record them.
    const sent: unknown[] = [];
    watchPostgres((_text, values) => {
      sent.push(...values);
    });
    try {
      await alice.createProperty('firstName');
      await ada(alice);
      const [allContacts] = (await alice.get('/lists')).json().lists;
      await erase(alice, { mobile: ADA_MOBILE });
      await api.drain();
      await alice.upsert([{ mobileCountryCode: '44', mobileNumber: '7911123456', mobileOptIn: true }]);
      const batch = { senderName: 'HERALD', body: 'Hi', listId: [allContacts.listId] };
      const dry = await alice.post('/sms/batch?dryRun=true', batch);
      assert.equal(dry.statusCode, 200, dry.body);
      assert.deepEqual(dry.json().recipients, {
        total: 2,
        willSend: 1,
        notSent: { noConsent: 0, suppressed: 1, duplicate: 0 },
      });
      const given = await alice.post('/sms/batch?dryRun=true', {
        senderName: 'HERALD',
        body: 'Hi',
        recipients: [{ mobileNo: ADA_MOBILE }, { mobileNo: '447911000001' }],
      });
      assert.equal(given.json().recipients.notSent.suppressed, 1, given.body);
      const sendId = await alice.accept('/sms/batch', batch);
      await api.drain();
      const recipients = (await alice.get(`/sms/${sendId}`)).json().recipients as Array<{
        recipient: string;
        status: string;
      }>;
      assert.deepEqual(
        recipients.map((r) => [r.recipient, r.status]).sort(),
        [
          ['447911000001', 'Delivered'],
          [ADA_MOBILE, 'NotSent'],
        ],
        JSON.stringify(recipients),
      );
    } finally {
      watchPostgres(undefined);
    }
    if (dialect === 'postgres') {
      const key = await erasureKey(api.t.ctx.db, api.t.ctx.encryptionKey);
      const padded = (pad: number) =>
        Buffer.from(Buffer.concat([key, Buffer.alloc(64 - key.length)]).map((b) => b ^ pad));
      const forms = [key, padded(0x36), padded(0x5c)];
      const carriers = sent.filter(
        (value) => value instanceof Uint8Array && forms.some((form) => Buffer.from(value).includes(form)),
      );
      assert.ok(sent.length > 0, 'the parameters were seen');
      assert.deepEqual(carriers, [], 'no parameter carries the key');
    }
  });

  it('erases a person from every message and record, keeps the counts, and keeps them suppressed', async () => {
    await alice.createProperty('firstName');
    const [adaId, otherId] = await ada(alice);
    const [allContacts] = (await alice.get('/lists')).json().lists;
    const single = await alice.accept('/sms/single', {
      recipient: ADA_MOBILE,
      senderName: 'HERALD',
      body: SECRET_TEXT,
    });
    const batch = await alice.accept('/sms/batch', {
      senderName: 'HERALD',
      body: 'Hello [firstName]',
      listId: [allContacts.listId],
      webHookUrl: receiver.url,
    });
    const email = await alice.accept(
      '/email/batch',
      buildBatch({ webHookUrl: receiver.url }, { recipients: [{ to: ADA_EMAIL }] }),
    );
    const later = await alice.accept('/sms/batch', {
      senderName: 'HERALD',
      body: 'See you later',
      recipients: [{ mobileNo: ADA_MOBILE }],
      scheduleDateTime: new Date(api.clock.now() + 3_600_000).toISOString(),
    });
    await api.drain();
    // A click on a link a tag made personal, as tracking records it.
    const clicked = await api.t.ctx.db
      .selectFrom('send_recipients')
      .select('id')
      .where('send_id', '=', email)
      .executeTakeFirstOrThrow();
    await api.t.ctx.db
      .insertInto('recipient_history')
      .values({
        recipient_id: clicked.id,
        status: 'Click',
        at: api.clock.now(),
        url: `https://shop.example/?e=${ADA_EMAIL}`,
      })
      .execute();
    const verification = await alice.post('/verify', { to: ADA_MOBILE });
    assert.ok(verification.statusCode < 300, verification.body);
    await api.drain();
    const mo = await alice.post('/sandbox/sms/inbound', { from: ADA_MOBILE, to: 'HERALD', text: REPLY });
    assert.equal(mo.statusCode, 201, mo.body);
    // A contact batch naming Ada that died, waiting for a retry by hand.
    const dead = await alice.postBatch({
      createUpdateContacts: [
        { mobileCountryCode: '44', mobileNumber: '7911123456', mobileOptIn: true },
        { mobileCountryCode: '44', mobileNumber: '7911000002', mobileOptIn: true },
      ],
    });
    assert.equal(dead.statusCode, 202, dead.body);
    await api.t.ctx.db.updateTable('jobs').set({ state: 'dead' }).where('kind', '=', 'contacts.batch').execute();
    api.clock.advance(1000);
    await api.drain();
    const usage = (await alice.get('/usage?from=2026-03-01&to=2026-03-31')).json();
    assert.ok(receiver.received.length > 0, 'the sends posted their statuses');
    assert.ok((await everyRow(api, dialect)).includes(ADA_MOBILE));

    // Bob's erasure of the same number touches nothing of Alice's.
    const bobs = await erase(bob, { mobile: ADA_MOBILE });
    await api.drain();
    assert.equal((await alice.get(`/contacts/${adaId}`)).statusCode, 200);
    assert.equal((await alice.get(`/privacy/erasures/${bobs}`)).statusCode, 404);

    // A receipt that names her number, waiting for a part of hers the SMSC answered, whose
    // outcome is not yet recorded.
    await api.t.ctx.db
      .insertInto('smpp_submits')
      .values({
        send_id: batch,
        recipient: ADA_MOBILE,
        part: 1,
        parts: 1,
        operator_message_id: 'op-waiting',
        at: api.clock.now(),
        smsc: 'default',
      })
      .execute();
    await api.t.ctx.db
      .insertInto('sms_receipts')
      .values({
        smsc: 'default',
        operator_message_id: 'op-waiting',
        status: 'Delivered',
        error_code: null,
        at: api.clock.now(),
        recipient: ADA_MOBILE,
      })
      .execute();
    // And one for a part of hers recorded, not yet taken (an ENROUTE it would use up).
    const part = await api.t.ctx.db
      .selectFrom('sms_parts')
      .innerJoin('send_recipients', 'send_recipients.id', 'sms_parts.recipient_id')
      .select(['sms_parts.smsc', 'sms_parts.operator_message_id'])
      .where('send_recipients.send_id', '=', single)
      .executeTakeFirstOrThrow();
    await api.t.ctx.db
      .insertInto('sms_receipts')
      .values({ ...part, status: 'Processed', error_code: null, at: api.clock.now(), recipient: ADA_MOBILE })
      .execute();
    const erasureId = await erase(alice, { mobile: ADA_MOBILE });
    const started = (await alice.get(`/privacy/erasures/${erasureId}`)).json();
    assert.equal(started.status, 'Processing');
    // Not yet sent: ended at once, posted with the hash.
    const scheduled = (await alice.get(`/sms/${later}`)).json();
    assert.deepEqual(
      scheduled.recipients.map((r: { status: string }) => r.status),
      ['NotSent'],
    );
    await api.drain();
    const done = (await alice.get(`/privacy/erasures/${erasureId}`)).json();
    assert.equal(done.status, 'Completed');
    assert.deepEqual(done.erased, { contacts: 1, messages: 5 });

    // No read, search or export shows them; the other contact stays.
    assert.equal((await alice.get(`/contacts/${adaId}`)).statusCode, 404);
    assert.equal((await alice.get(`/contacts/${otherId}`)).statusCode, 200);
    assert.deepEqual((await alice.get(`/sms?recipient=${ADA_MOBILE}`)).json().sends, []);
    assert.deepEqual((await alice.get(`/email/batch?email=${ADA_EMAIL}`)).json().batches, []);
    const exported = (await alice.get(`/privacy/export?mobile=${ADA_MOBILE}`)).json();
    assert.deepEqual([exported.contacts, exported.sms, exported.email], [[], [], []]);
    for (const id of [single, batch, later]) {
      const body = (await alice.get(`/sms/${id}`)).body;
      assert.ok(!body.includes(ADA_MOBILE) && !body.includes(SECRET_TEXT), body);
    }
    assert.ok(!(await alice.get(`/email/batch/${email}`)).body.includes(ADA_EMAIL));
    const rows = await everyRow(api, dialect);
    for (const needle of [ADA_MOBILE, ADA_EMAIL, SECRET_TEXT, REPLY, 'Zebulon']) {
      assert.ok(!rows.includes(needle), `${needle} is still held`);
    }
    if (dialect === 'postgres') {
      const dump = (await pgDump(api.t.database.url)).toString();
      for (const needle of [ADA_MOBILE, ADA_EMAIL, SECRET_TEXT, REPLY, 'Zebulon']) {
        assert.ok(!dump.includes(needle), `the dump holds ${needle}`);
      }
    }
    // What was billed is as it was; the scheduled message counts as NotSent.
    const after = (await alice.get('/usage?from=2026-03-01&to=2026-03-31')).json();
    assert.ok(usage.totals.sms.messages > 0);
    assert.deepEqual(
      [after.totals.sms.messages, after.totals.sms.parts],
      [usage.totals.sms.messages, usage.totals.sms.parts],
    );
    assert.equal(after.totals.email.messages, usage.totals.email.messages);
    assert.equal(after.totals.sms.statuses.NotSent ?? 0, (usage.totals.sms.statuses.NotSent ?? 0) + 1);

    // The dead batch, retried, no longer writes her; a new send to her is not sent.
    const [job] = await api.t.ctx.db.selectFrom('jobs').select('id').where('kind', '=', 'contacts.batch').execute();
    const retried = await api.t.app.inject({
      method: 'POST',
      url: `/admin/jobs/${job.id}/retry`,
      headers: bearer(ADMIN_TOKEN),
    });
    assert.equal(retried.statusCode < 300, true, retried.body);
    await api.drain();
    const holding = await api.t.ctx.db
      .selectFrom('contacts')
      .select('mobile')
      .where('account_id', '=', alice.account.row.id)
      .execute();
    assert.deepEqual(holding.map((c) => c.mobile).sort(), ['447911000001', '447911000002']);
    const refused = await alice.post('/sms/single', { recipient: ADA_MOBILE, senderName: 'HERALD', body: 'hi' });
    assert.equal(refused.statusCode, 422, refused.body);
    assert.match(refused.body, /erased/);
    await alice.upsert([{ mobileCountryCode: '44', mobileNumber: '7911123456', mobileOptIn: true }]);
    const again = await alice.accept('/sms/batch', { senderName: 'HERALD', body: 'Hi', listId: [allContacts.listId] });
    await api.drain();
    const recipients = (await alice.get(`/sms/${again}`)).json().recipients as Array<{
      recipient: string;
      status: string;
    }>;
    assert.deepEqual(recipients.find((r) => r.recipient === ADA_MOBILE)?.status, 'NotSent');
    assert.equal(recipients.filter((r) => r.status !== 'NotSent').length, 2);
  });

  it('leaves another account’s receipt waiting for its part when it erases the same number', async () => {
    // Alice has sent to Ada: her erasure has Ada's messages to erase.
    await alice.accept('/sms/single', { recipient: ADA_MOBILE, senderName: 'HERALD', body: 'hi' });
    await api.drain();
    // Bob's page to Ada is with his SMSC, which reports its receipt, naming her number, before its
    // answer is recorded (an operator that answers both at once): the receipt waits for its part.
    const reported = Promise.withResolvers<void>();
    const released = Promise.withResolvers<void>();
    const transport: SmsTransport = {
      async submit(messages) {
        const ids = messages.map((m) => m.segmented.parts.map((_, i) => `bob-${m.recipient}-${i + 1}`));
        const receipts = ids.flat().map((operatorMessageId) => ({
          smsc: 'default',
          operatorMessageId,
          state: 'DELIVRD',
          errorCode: null,
          recipient: ADA_MOBILE,
        }));
        await api.t.ctx.database.db
          .transaction()
          .execute((trx) => applyReceipts(trx, dialect, api.clock, { receipts }));
        reported.resolve();
        await released.promise;
        return messages.map((_, i) => ({ accepted: true as const, operatorMessageIds: ids[i] }));
      },
      async close() {},
    };
    const bobs = new Worker({ database: api.t.ctx.database, clock: api.clock });
    bobs.register(SMS_SINGLE_KIND, smsSingleHandler({ ...api.t.ctx, transport }), { concurrency: 1 });
    const queueId = await bob.accept('/sms/single', { recipient: ADA_MOBILE, senderName: 'HERALD', body: 'hi' });
    const sending = bobs.drain();
    try {
      await reported.promise;
      const waiting = () => api.t.ctx.db.selectFrom('sms_receipts').select('operator_message_id').execute();
      assert.deepEqual(await waiting(), [{ operator_message_id: `bob-${ADA_MOBILE}-1` }]);

      // Alice erases Ada: Bob's receipt is his, not hers to erase.
      const erasureId = await erase(alice, { mobile: ADA_MOBILE });
      await api.drain();
      assert.equal((await alice.get(`/privacy/erasures/${erasureId}`)).json().status, 'Completed');
      assert.deepEqual(await waiting(), [{ operator_message_id: `bob-${ADA_MOBILE}-1` }]);
    } finally {
      released.resolve();
      await sending;
    }
    // His page recorded, the receipt takes its part: his message is Delivered.
    const [recipient] = (await bob.get(`/sms/${queueId}`)).json().recipients;
    assert.deepEqual([recipient.recipient, recipient.status], [ADA_MOBILE, 'Delivered']);
  });

  it('erases by email the contacts holding it and their numbers too', async () => {
    await alice.createProperty('firstName');
    const [adaId] = await ada(alice);
    const erasureId = await erase(alice, { email: ADA_EMAIL.toUpperCase() });
    await api.drain();
    assert.equal((await alice.get(`/privacy/erasures/${erasureId}`)).json().erased.contacts, 1);
    assert.equal((await alice.get(`/contacts/${adaId}`)).statusCode, 404);
    const refused = await alice.post('/sms/single', { recipient: ADA_MOBILE, senderName: 'HERALD', body: 'hi' });
    assert.equal(refused.statusCode, 422);

    // A lookup by the address finds the erased person's suppression; the pages do not list it.
    const found = (await alice.get(`/email/suppressions?email=${ADA_EMAIL}`)).json().suppressions;
    assert.deepEqual(
      found.map((s: { reason: string }) => s.reason),
      ['erased'],
    );
    assert.deepEqual((await alice.get('/email/suppressions')).json().suppressions, []);
    assert.deepEqual((await bob.get(`/email/suppressions?email=${ADA_EMAIL}`)).json().suppressions, []);
    // Removed, the number may be sent to again.
    const removal = { method: 'DELETE' as const, url: `/sms/suppressions/${ADA_MOBILE}` };
    assert.equal((await api.t.app.inject({ ...removal, headers: bearer(bob.token) })).statusCode, 404);
    assert.equal((await api.t.app.inject({ ...removal, headers: bearer(alice.token) })).statusCode, 204);
    await alice.accept('/sms/single', { recipient: ADA_MOBILE, senderName: 'HERALD', body: 'hi' });
  });

  it('keeps an erased person suppressed after ENCRYPTION_KEY is replaced and the old one dropped', async () => {
    await api.close();
    const hex = (key: ReturnType<typeof generateKey>) => key.export().toString('hex');
    const [old, replacing] = [generateKey(), generateKey()];
    const first = await startApiTest(dialect, { env: { ENCRYPTION_KEY: hex(old), SMS_TRANSPORT: 'sandbox:' } });
    const client = await first.client();
    await erase(client, { mobile: ADA_MOBILE });
    await first.drain();
    const database = first.t.database;
    await first.t.app.close();
    const restart = (env: Record<string, string>) =>
      startTestApp(dialect, { database, env: { SMS_TRANSPORT: 'sandbox:', ...env } });
    // The start with both keys seals the key of the hashes anew; the next has only the new one.
    await (await restart({ ENCRYPTION_KEY: hex(replacing), ENCRYPTION_KEY_PREVIOUS: hex(old) })).app.close();
    const replaced = await restart({ ENCRYPTION_KEY: hex(replacing) });
    try {
      const refused = await replaced.app.inject({
        method: 'POST',
        url: '/sms/single',
        headers: bearer(await replaced.tokenFor(client.account)),
        payload: { recipient: ADA_MOBILE, senderName: 'HERALD', body: 'hi' },
      });
      assert.equal(refused.statusCode, 422, refused.body);
      assert.match(refused.body, /erased/);
    } finally {
      await replaced.close();
    }
    // A key that never held it cannot open it: with someone erased, the start stops.
    const lost = generateKey();
    await rotateJwtSecret(database.db, new Keyring(lost));
    try {
      await assert.rejects(
        restart({ ENCRYPTION_KEY: hex(lost) }),
        (error: unknown) => error instanceof ConfigError && /^invalid ENCRYPTION_KEY: .*erased/.test(error.message),
      );
    } finally {
      await first.close();
    }
    api = await startApiTest(dialect);
  });

  it('passes a batch entry that only mentions the person, and completes', { timeout: 30_000 }, async () => {
    await alice.createProperty('referrer');
    // Carl's property holds Ada's number as a quoted JSON string: the job still names her
    // after her own entries leave it.
    const dead = await alice.postBatch({
      createUpdateContacts: [
        {
          mobileCountryCode: '44',
          mobileNumber: '7911000003',
          mobileOptIn: true,
          propertyfields: [{ propertyname: 'referrer', propertyvalue: ADA_MOBILE }],
        },
      ],
    });
    assert.equal(dead.statusCode, 202, dead.body);
    await api.t.ctx.db.updateTable('jobs').set({ state: 'dead' }).where('kind', '=', 'contacts.batch').execute();
    const erasureId = await erase(alice, { mobile: ADA_MOBILE });
    await api.drain();
    assert.equal((await alice.get(`/privacy/erasures/${erasureId}`)).json().status, 'Completed');
    const [job] = await api.t.ctx.db
      .selectFrom('jobs')
      .select('payload')
      .where('kind', '=', 'contacts.batch')
      .execute();
    assert.equal(JSON.parse(job.payload).contacts.length, 1, "Carl's entry stays");
  });

  /** A batch to `numbers` that Alice's quiet hours hold: 12:00 in London, inside 11:00–13:00. */
  const heldBatch = async (numbers: string[]) => {
    const patched = await api.t.app.inject({
      method: 'PATCH',
      url: '/account',
      headers: { authorization: `Bearer ${alice.token}` },
      payload: { quietHours: { start: '11:00', end: '13:00' } },
    });
    assert.equal(patched.statusCode, 200, patched.body);
    const queueId = await alice.accept('/sms/batch', {
      senderName: 'HERALD',
      body: 'Spring sale',
      recipients: numbers.map((mobileNo) => ({ mobileNo })),
    });
    await api.drain();
    assert.deepEqual((await alice.get(`/sms/${queueId}`)).json().totals, { Scheduled: numbers.length });
    return queueId;
  };

  it('ends a recipient quiet hours held: its hold goes with it, and its send completes', {
    timeout: 30_000,
  }, async () => {
    const queueId = await heldBatch([ADA_MOBILE]);
    await erase(alice, { mobile: ADA_MOBILE });
    await api.drain();
    // Past the hold's end, when the send's job wakes.
    api.clock.advance(2 * 3_600_000);
    await api.drain();
    const sent = (await alice.get(`/sms/${queueId}`)).json();
    assert.deepEqual([sent.status, sent.totals], ['Completed', { NotSent: 1 }]);
    const [row] = await api.t.ctx.db
      .selectFrom('send_recipients')
      .select(['due_at', 'retry_at'])
      .where('send_id', '=', queueId)
      .execute();
    assert.deepEqual([row.due_at, row.retry_at], [null, null]);
    assert.deepEqual((await alice.get('/sandbox/sms')).json().messages, [], 'nothing went');
  });

  it('refuses, at the end of its hold, a recipient whose number an erasure suppressed meanwhile', {
    timeout: 30_000,
  }, async () => {
    const queueId = await heldBatch([ADA_MOBILE, '447911000001']);
    // As an erasure that raced the hold leaves it: the number suppressed by its hash, the held row untouched.
    const key = await erasureKey(api.t.ctx.db, api.t.ctx.encryptionKey);
    await api.t.ctx.db
      .insertInto('erased_suppressions')
      .values({
        account_id: alice.account.row.id,
        channel: 'sms',
        hash: erasedAddress(key, ADA_MOBILE),
        reason: 'erased',
        created_at: api.clock.now(),
      })
      .execute();
    api.clock.advance(2 * 3_600_000);
    await api.drain();
    const recipients = (await alice.get(`/sms/${queueId}`)).json().recipients as Array<{
      recipient: string;
      status: string;
      reason: string | null;
    }>;
    assert.deepEqual(recipients.map((r) => [r.recipient, r.status, r.reason]).sort(), [
      ['447911000001', 'Delivered', null],
      [ADA_MOBILE, 'NotSent', 'suppressed: erased'],
    ]);
  });

  it('ends a recipient its relay deferred: it is not tried again', { timeout: 30_000 }, async () => {
    const deferring = await startApiTest(dialect, {
      clock: new ManualClock(Date.UTC(2026, 2, 10, 12)),
      env: { SMS_TRANSPORT: 'sandbox:', EMAIL_TRANSPORT: 'sandbox:?defer=zebulon' },
    });
    try {
      const carol = await deferring.client();
      const batchId = await carol.accept('/email/batch', buildBatch({}, { recipients: [{ to: ADA_EMAIL }] }));
      await deferring.drain();
      const statusOf = async () => (await carol.get(`/email/batch/${batchId}`)).json();
      assert.equal((await statusOf()).recipients[0].status, 'Deferred');
      await erase(carol, { email: ADA_EMAIL });
      await deferring.drain();
      // Past every retry the relay's deferral asked for.
      deferring.clock.advance(48 * 3_600_000);
      await deferring.drain();
      const [recipient] = (await statusOf()).recipients;
      assert.equal(recipient.status, 'Dropped');
      assert.equal((await statusOf()).status, 'Completed');
      const tried = (await carol.get('/sandbox/email?limit=100')).json().messages;
      assert.equal(tried.length, 0, 'the sandbox took nothing: the deferred try was not kept, nor another made');
      assert.ok(!(await everyRow(deferring, dialect)).includes(ADA_EMAIL), 'nor the relay’s reply quoting her');
    } finally {
      await deferring.close();
    }
  });

  it('erases the address from a bounce’s reply and its suppression, and records nothing that comes back later', {
    timeout: 30_000,
  }, async () => {
    const bouncing = await startApiTest(dialect, {
      clock: new ManualClock(Date.UTC(2026, 2, 10, 12)),
      env: { SMS_TRANSPORT: 'sandbox:', EMAIL_TRANSPORT: 'sandbox:?bounce=zebulon' },
    });
    try {
      const carol = await bouncing.client();
      const twice = buildBatch(
        { webHookUrl: receiver.url },
        { recipients: [{ to: ADA_EMAIL }, { to: 'b@example.com' }] },
      );
      const batchId = await carol.accept('/email/batch', twice);
      await bouncing.drain();
      const recipients = (await carol.get(`/email/batch/${batchId}`)).json().recipients;
      assert.deepEqual(recipients.map((r: { status: string }) => r.status).sort(), ['Bounce', 'Delivered']);
      await erase(carol, { email: ADA_EMAIL });
      await bouncing.drain();
      assert.ok(!(await everyRow(bouncing, dialect)).includes(ADA_EMAIL), 'the reply and the suppression quoted her');

      // Her message's unsubscribe link, followed after the erasure: nothing is written of it.
      const { id } = await bouncing.t.ctx.db
        .selectFrom('send_recipients')
        .select('id')
        .where('send_id', '=', batchId)
        .where('address', 'like', 'erased:%')
        .executeTakeFirstOrThrow();
      await bouncing.t.ctx.database.call(recordTracking, unsubscribed(Number(id), batchId, bouncing.clock.now()));
      const listed = (await carol.get('/email/suppressions')).json().suppressions;
      assert.deepEqual(listed, [], 'no suppression of the hash is listed');
      const history = await bouncing.t.ctx.db
        .selectFrom('recipient_history')
        .select('status')
        .where('recipient_id', '=', id)
        .execute();
      assert.ok(!history.some((h) => h.status === 'Unsubscribe'));
    } finally {
      await bouncing.close();
    }
  });

  it('erases an unsubscribe that came between the erasure’s start and its job: nothing names them', async () => {
    const batchId = await alice.accept('/email/batch', buildBatch({}, { recipients: [{ to: ADA_EMAIL }] }));
    await api.drain();
    const { id } = await api.t.ctx.db
      .selectFrom('send_recipients')
      .select('id')
      .where('send_id', '=', batchId)
      .executeTakeFirstOrThrow();
    await erase(alice, { email: ADA_EMAIL });
    await api.t.ctx.database.call(recordTracking, unsubscribed(Number(id), batchId, api.clock.now()));
    await api.drain();
    assert.ok(!(await everyRow(api, dialect)).includes(ADA_EMAIL));
    const found = (await alice.get(`/email/suppressions?email=${ADA_EMAIL}`)).json().suppressions;
    assert.equal(found.length, 1, 'still suppressed, by the hash');
  });

  it('leaves the sandbox reads whole and a sealed single sealed, once their person is erased', async () => {
    const started = [
      await alice.post('/verify', { to: ADA_MOBILE }),
      await alice.post('/verify', { to: ADA_EMAIL, channel: 'email' }),
    ];
    for (const response of started) assert.equal(response.statusCode, 201, response.body);
    const single = await alice.accept('/sms/single', {
      recipient: ADA_MOBILE,
      senderName: 'HERALD',
      body: 'Your PIN is 0000',
      isBodyEncrypted: true,
    });
    await api.drain();
    await erase(alice, { mobile: ADA_MOBILE });
    await erase(alice, { email: ADA_EMAIL });
    await api.drain();
    const sms = await alice.get('/sandbox/sms');
    assert.equal(sms.statusCode, 200, sms.body);
    assert.ok(sms.json().messages.length >= 2);
    for (const message of sms.json().messages) {
      assert.match(message.recipient, /^erased:/);
      assert.ok(!message.text, 'no text is left');
    }
    const email = await alice.get('/sandbox/email');
    assert.equal(email.statusCode, 200, email.body);
    assert.deepEqual(
      email.json().messages.map((m: { to: string; raw: string }) => [m.to.startsWith('erased:'), m.raw]),
      [[true, '']],
    );
    const read = (await alice.get(`/sms/${single}`)).json();
    assert.equal(read.contentState, 'sealed');
    assert.deepEqual(read.content, { senderName: null, body: null });
  });

  it('records who asked: an access token, or the API key by its id', async () => {
    const created = await alice.post('/api-keys', { name: 'privacy desk', scopes: ['privacy'] });
    assert.equal(created.statusCode, 201, created.body);
    const { apiKeyId, key } = created.json();
    const byKey = await api.t.app.inject({
      method: 'POST',
      url: '/privacy/erasures',
      headers: bearer(key),
      payload: { email: ADA_EMAIL },
    });
    assert.equal(byKey.statusCode, 202, byKey.body);
    const byToken = await erase(alice, { mobile: ADA_MOBILE });
    const record = async (id: string) =>
      (await api.t.ctx.db.selectFrom('erasures').select('requested_by').where('id', '=', id).executeTakeFirstOrThrow())
        .requested_by;
    assert.equal(await record(byKey.json().erasureId), `apiKey:${apiKeyId}`);
    assert.equal(await record(byToken), 'token');
  });

  it('begins one erasure for a request sent again with its Idempotency-Key', async () => {
    const keyed = (payload: object) =>
      api.t.app.inject({
        method: 'POST',
        url: '/privacy/erasures',
        headers: { authorization: `Bearer ${alice.token}`, 'idempotency-key': 'erase-ada' },
        payload,
      });
    const first = await keyed({ email: ADA_EMAIL });
    assert.equal(first.statusCode, 202, first.body);
    const again = await keyed({ email: ADA_EMAIL });
    assert.equal(again.statusCode, 202, again.body);
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.deepEqual(again.json(), first.json());
    assert.equal((await keyed({ email: 'other@example.com' })).statusCode, 422, 'the key with another body');
    const erasures = await api.t.ctx.db.selectFrom('erasures').select('id').execute();
    assert.deepEqual(
      erasures.map((e) => e.id),
      [first.json().erasureId],
    );
  });

  it('takes exactly one of mobile and email, well formed', async () => {
    for (const body of [
      {},
      { mobile: ADA_MOBILE, email: ADA_EMAIL },
      { email: 'not an address' },
      { mobile: '12ab' },
    ]) {
      const response = await alice.post('/privacy/erasures', body);
      assert.equal(response.statusCode, 400, JSON.stringify(body));
    }
    assert.equal((await alice.get('/privacy/erasures/not-a-uuid')).statusCode, 400);
    assert.equal((await alice.get(`/privacy/erasures/${crypto.randomUUID()}`)).statusCode, 404);
    assert.equal(await api.t.ctx.db.selectFrom('erasures').select('id').executeTakeFirst(), undefined);
  });
});
