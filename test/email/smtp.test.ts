import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import type { AddressInfo, Socket } from 'node:net';
import { simpleParser } from 'mailparser';
import { SMTPServer } from 'smtp-server';
import { ManualClock } from '../../src/clock.ts';
import { returnPath, trackingKey, unsubscribeMailbox } from '../../src/email/tracking.ts';
import { startSmtpSink, type SmtpSink } from '../../src/sim/smtp.ts';
import { startApiTest, type ApiClient, type ApiTest } from '../support/client.ts';
import { ADMIN_TOKEN, bearer } from '../support/app.ts';
import { forEachDatabase } from '../support/databases.ts';
import { startReceiver } from '../webhooks/support.ts';
import { dkimpyVerdict, mailauthVerdict } from './dkim-verifiers.ts';
import { base64, buildBatch, sendBatch } from './support.ts';

/**
 * A relay that refuses each address's first message at the end of its data (451, as a content
 * filter that greylists does) and takes it the next time, keeping every attempt's Message-ID:
 * the sink keeps only what it took.
 */
async function greylistingRelay() {
  const attempts: Array<{ to: string; messageId: string | undefined; code: number }> = [];
  const server = new SMTPServer({
    logger: false,
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    onData(stream, session, callback) {
      let raw = '';
      stream.on('data', (chunk: Buffer) => (raw += chunk.toString('latin1')));
      stream.once('end', () => {
        const to = session.envelope.rcptTo[0].address;
        const code = attempts.some((attempt) => attempt.to === to) ? 250 : 451;
        attempts.push({ to, messageId: /^Message-ID:\s*(\S+)/im.exec(raw)?.[1], code });
        callback(code === 250 ? null : Object.assign(new Error('4.3.0 try again later'), { responseCode: 451 }));
      });
    },
  });
  const sockets = new Set<Socket>();
  server.server.on('connection', (socket: Socket) => sockets.add(socket.once('close', () => sockets.delete(socket))));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const close = async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return { port: (server.server.address() as AddressInfo).port, attempts, close };
}

interface Recipient {
  email: string;
  status: string;
  messageId: string;
  history: Array<{ event: string; reply?: string | null }>;
}

// Email over real SMTP: the worker's SMTP transport (nodemailer's pool) hands every message
// to the SMTP sink (herald sim smtp) in this process, whose rules answer per address.
forEachDatabase((dialect) => {
  let sink: SmtpSink;
  let api: ApiTest;
  let client: ApiClient;
  const start = async (query = '', env: Record<string, string> = {}) => {
    api = await startApiTest(dialect, {
      clock: new ManualClock(Date.now()),
      env: { EMAIL_TRANSPORT: `smtp://127.0.0.1:${sink.port}${query}`, ...env },
    });
    client = await api.client();
  };
  beforeEach(async () => {
    sink = await startSmtpSink({ httpPort: null });
  });
  /** Closed after the app, whose pooled connections they would otherwise wait for. */
  let closeAfter: Array<() => Promise<void>> = [];
  afterEach(async () => {
    await api?.close();
    await sink.close();
    for (const close of closeAfter) await close();
    closeAfter = [];
  });

  const recipients = async (batchId: string): Promise<Recipient[]> => {
    const response = await client.get(`/email/batch/${batchId}?limit=1000`);
    assert.equal(response.statusCode, 200, response.body);
    return response.json().recipients as Recipient[];
  };
  const recipient = async (batchId: string, email: string) =>
    (await recipients(batchId)).find((r) => r.email === email)!;
  const suppressions = async (email: string) =>
    (await client.get(`/email/suppressions?email=${encodeURIComponent(email)}`)).json().suppressions as Array<{
      reason: string;
    }>;
  const metric = async (name: string, labels: Record<string, string> = {}) => {
    const found = (await api.t.ctx.metrics.getSingleMetric(name)!.get()).values.find((v) =>
      Object.entries(labels).every(([k, l]) => v.labels[k] === l),
    );
    return found?.value ?? 0;
  };

  it(
    'delivers the rendered message as is: text and HTML, headers, its Message-ID, the envelope sender the ' +
      'recipient’s VERP address, and a DKIM signature that verifies as received',
    async () => {
      // With INBOUND_SMTP_PORT set, List-Unsubscribe carries the mailto: too (the listener itself is not needed here).
      await start('', { INBOUND_SMTP_PORT: '0' });
      const batchId = await sendBatch(
        api,
        client,
        buildBatch(
          {
            subject: 'Hello [firstName]',
            emailBody: base64('<p>Dear [firstName], <a href="https://example.com/offer">see the offer</a>.</p>'),
          },
          {
            recipients: [
              { to: 'ada@example.com', personalizationSubstitutionTags: [{ tagName: '[firstName]', tagValue: 'Ada' }] },
            ],
          },
        ),
      );
      const ada = await recipient(batchId, 'ada@example.com');
      assert.equal(ada.status, 'Delivered');
      assert.deepEqual(
        ada.history.map((h) => h.event),
        ['Processed', 'Delivered'],
      );

      const [mail] = sink.received({ to: 'ada@example.com' });
      assert.deepEqual(mail.to, ['ada@example.com']);
      const parsed = await simpleParser(mail.raw);
      assert.equal(parsed.subject, 'Hello Ada');
      assert.equal(parsed.from?.value[0].address, 'news@mail.localhost');
      assert.equal(parsed.messageId, `<${ada.messageId}@mail.localhost>`);
      assert.match(parsed.text ?? '', /Dear Ada, see the offer/);
      assert.match(
        String(parsed.html),
        /<p>Dear Ada, <a href="http:\/\/localhost:8080\/t\/c\/[^"]+">see the offer<\/a>\.<\/p>/,
      );
      const row = await api.t.ctx.db
        .selectFrom('send_recipients')
        .select('id')
        .where('send_id', '=', batchId)
        .where('address', '=', 'ada@example.com')
        .executeTakeFirstOrThrow();
      const keys = trackingKey(api.t.ctx.encryptionKey);
      const header = (name: string) =>
        parsed.headerLines.find((line) => line.key === name)?.line.replace(/\r\n[ \t]+/g, ' ');
      const listUnsubscribe = /^List-Unsubscribe: <(http:\/\/localhost:8080\/t\/u\/[^>]+)>, <mailto:([^>]+)>$/.exec(
        header('list-unsubscribe') ?? '',
      );
      assert.ok(listUnsubscribe, header('list-unsubscribe'));
      assert.equal(
        listUnsubscribe[2],
        unsubscribeMailbox(keys, 'mail.localhost', { recipientId: Number(row.id), sendId: batchId }),
      );
      assert.equal(header('list-unsubscribe-post'), 'List-Unsubscribe-Post: List-Unsubscribe=One-Click');

      // The bytes as the relay took them verify with the record Herald says to publish, by two
      // verifiers we did not write.
      const { dkim } = (
        await api.t.app.inject({ method: 'GET', url: '/admin/dkim', headers: bearer(ADMIN_TOKEN) })
      ).json();
      const raw = mail.raw.toString('utf8');
      const verdict = await mailauthVerdict(raw, dkim);
      assert.deepEqual([verdict.status, verdict.domain, verdict.selector], ['pass', 'mail.localhost', dkim.selector]);
      for (const signed of ['from', 'subject', 'message-id', 'list-unsubscribe', 'list-unsubscribe-post'])
        assert.ok(verdict.signedHeaders.includes(signed), `${signed} in h=`);
      assert.equal(await dkimpyVerdict(raw, dkim), 'pass');

      // MAIL FROM names the recipient's row by a token Herald signed: a bounce to it names this message.
      assert.match(mail.from, /^bounces\+[0-9a-f]+@mail\.localhost$/);
      assert.equal(mail.from, returnPath(keys, 'mail.localhost', { recipientId: Number(row.id), sendId: batchId }));
      assert.equal(await metric('herald_smtp_answers_total', { class: '2xx' }), 1);
    },
  );

  it(
    'answers by class: 451 then 250 is Deferred then Delivered once; 550 5.1.1 a hard Bounce that suppresses; 552 ' +
      '5.2.2 a soft one that does not',
    async () => {
      sink.setRules([
        { match: 'greylisted@example.com', action: 'defer', times: 1 },
        { match: 'unknown@example.com', action: 'reject', code: 550, status: '5.1.1', text: 'no such user' },
        { match: 'full@example.com', action: 'reject', code: 552, status: '5.2.2', text: 'mailbox full' },
      ]);
      await start();
      const batchId = await sendBatch(
        api,
        client,
        buildBatch(
          {},
          { recipients: [{ to: 'greylisted@example.com' }, { to: 'unknown@example.com' }, { to: 'full@example.com' }] },
        ),
      );

      const unknown = await recipient(batchId, 'unknown@example.com');
      assert.equal(unknown.status, 'Bounce');
      assert.equal(unknown.history.at(-1)!.reply, 'hard bounce: 550 5.1.1 no such user');
      assert.equal((await suppressions('unknown@example.com'))[0].reason, 'hard bounce: 550 5.1.1 no such user');
      const full = await recipient(batchId, 'full@example.com');
      assert.equal(full.status, 'Bounce');
      assert.equal(full.history.at(-1)!.reply, 'soft bounce: 552 5.2.2 mailbox full');
      assert.deepEqual(await suppressions('full@example.com'), []);

      let greylisted = await recipient(batchId, 'greylisted@example.com');
      assert.equal(greylisted.status, 'Deferred');
      assert.equal(greylisted.history.at(-1)!.reply, '451 4.3.0 try again later');
      assert.equal(await metric('herald_email_deferred_recipients'), 1);
      api.clock.advance(60_000);
      await api.drain();
      greylisted = await recipient(batchId, 'greylisted@example.com');
      assert.equal(greylisted.status, 'Delivered');
      assert.deepEqual(
        greylisted.history.map((h) => h.event),
        ['Processed', 'Deferred', 'Delivered'],
      );
      assert.equal(sink.received({ to: 'greylisted@example.com' }).length, 1, 'one message received');
      assert.equal(sink.received().length, 1, 'the refused ones were not taken');
      assert.equal((await client.get(`/email/batch/${batchId}`)).json().status, 'Completed');

      assert.deepEqual(
        [
          await metric('herald_smtp_answers_total', { class: '2xx' }),
          await metric('herald_smtp_answers_total', { class: '4xx' }),
          await metric('herald_smtp_answers_total', { class: '5xx' }),
        ],
        [1, 1, 2],
      );
      assert.deepEqual(
        [
          await metric('herald_email_bounces_total', { kind: 'hard' }),
          await metric('herald_email_bounces_total', { kind: 'soft' }),
        ],
        [1, 1],
      );
      assert.equal(await metric('herald_email_deferred_recipients'), 0);
    },
  );

  it('keeps one messageId across a 451 and its retry: events, the read, both attempts’ Message-ID', async () => {
    const relay = await greylistingRelay();
    const receiver = await startReceiver();
    closeAfter = [relay.close, receiver.close];
    await start('', { EMAIL_TRANSPORT: `smtp://127.0.0.1:${relay.port}` });
    const batchId = await sendBatch(api, client, buildBatch({ webHookUrl: receiver.url }));
    assert.equal((await recipient(batchId, 'ada@example.com')).status, 'Deferred');
    api.clock.advance(60_000);
    await api.drain();
    const ada = await recipient(batchId, 'ada@example.com');
    assert.equal(ada.status, 'Delivered');
    assert.deepEqual(
      ada.history.map((h) => h.event),
      ['Processed', 'Deferred', 'Delivered'],
    );

    api.clock.advance(1000);
    await api.drain();
    type Event = { event: string; messageId: string };
    const events = receiver.received.flatMap((post) => JSON.parse(post.body).data as Event[]);
    assert.deepEqual(
      events.map((e) => e.event),
      ['Processed', 'Deferred', 'Delivered'],
    );
    assert.deepEqual(
      events.map((e) => e.messageId),
      [ada.messageId, ada.messageId, ada.messageId],
    );
    assert.deepEqual(relay.attempts, [
      { to: 'ada@example.com', messageId: `<${ada.messageId}@mail.localhost>`, code: 451 },
      { to: 'ada@example.com', messageId: `<${ada.messageId}@mail.localhost>`, code: 250 },
    ]);
  });

  it(
    'loses nothing when the relay drops the connection mid-batch: the message in flight is Deferred, the pool ' +
      'reconnects, every recipient Delivered once',
    async () => {
      sink.setFaults({ dropAfter: 50 });
      await start();
      const addresses = Array.from({ length: 200 }, (_, i) => `r${i}@example.com`);
      const batchId = await sendBatch(api, client, buildBatch({}, { recipients: addresses.map((to) => ({ to })) }));
      const first = await recipients(batchId);
      const deferred = first.filter((r) => r.status === 'Deferred');
      assert.ok(deferred.length >= 1, 'the message whose answer never came');
      assert.ok(
        deferred.every((r) => /^no answer from the relay: ECONNECTION/.test(r.history.at(-1)!.reply!)),
        JSON.stringify(deferred[0]?.history),
      );
      assert.equal(
        first.filter((r) => r.status === 'Delivered').length,
        200 - deferred.length,
        'the pool went on over a new connection',
      );
      assert.ok((await metric('herald_smtp_answers_total', { class: 'connection' })) >= 1);

      api.clock.advance(60_000);
      await api.drain();
      assert.deepEqual(new Set((await recipients(batchId)).map((r) => r.status)), new Set(['Delivered']));
      const received = sink
        .received({ limit: 1000 })
        .flatMap((m) => m.to)
        .sort();
      assert.deepEqual(received, [...addresses].sort(), 'each address received exactly once');
    },
  );

  it('with tls=require, defers rather than sends in clear to a relay that offers no STARTTLS', async () => {
    await start('?tls=require');
    const batchId = await sendBatch(api, client, buildBatch({}, { recipients: [{ to: 'secret@example.com' }] }));
    const secret = await recipient(batchId, 'secret@example.com');
    assert.equal(secret.status, 'Deferred');
    assert.match(secret.history.at(-1)!.reply!, /^the relay refused the session/);
    assert.equal(sink.received().length, 0);
    assert.equal(sink.stats().messages.accepted, 0);
  });
});
