import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { simpleParser } from 'mailparser';
import { createTransport } from 'nodemailer';
import { ManualClock } from '../../src/clock.ts';
import { startInboundSmtp, type InboundSmtp } from '../../src/email/inbound-smtp.ts';
import { FEEDBACK_MAILBOX, returnPath, trackingKey } from '../../src/email/tracking.ts';
import type { SentReport } from '../../src/sim/smtp-reports.ts';
import { startSmtpSink, type SmtpSink } from '../../src/sim/smtp.ts';
import { startApiTest, type ApiClient, type ApiTest } from '../support/client.ts';
import { ADMIN_TOKEN, bearer } from '../support/app.ts';
import { forEachDatabase } from '../support/databases.ts';
import { buildBatch, sendBatch } from './support.ts';

interface Recipient {
  email: string;
  status: string;
  messageId: string;
  history: Array<{ event: string; reply?: string | null }>;
}

// The whole loop over real SMTP: Herald sends through its SMTP transport to the sink
// (herald sim smtp), whose control route POST /reports then sends a DSN or an ARF report about a
// message it took back to Herald's inbound listener, as the recipient's provider would later.
const BOUNCE_DOMAIN = 'bounce.example';
const quiet = { info() {}, warn() {}, error() {} };

forEachDatabase((dialect) => {
  let sink: SmtpSink;
  let api: ApiTest;
  let alice: ApiClient;
  let inbound: InboundSmtp;

  beforeEach(async () => {
    sink = await startSmtpSink();
    api = await startApiTest(dialect, {
      clock: new ManualClock(Date.now()),
      env: { EMAIL_TRANSPORT: `smtp://127.0.0.1:${sink.port}`, INBOUND_SMTP_PORT: '0', BOUNCE_DOMAIN },
    });
    alice = await api.client();
    inbound = await startInboundSmtp(api.t.ctx, { host: '127.0.0.1', port: 0, log: quiet });
  });
  afterEach(async () => {
    await inbound.close();
    await api.close();
    await sink.close();
  });

  /** Asks the sink, over its control port, to send a report to Herald's inbound listener. */
  async function report(body: Record<string, unknown>): Promise<SentReport> {
    const response = await fetch(`http://127.0.0.1:${sink.httpPort}/reports`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ host: '127.0.0.1', port: inbound.port, ...body }),
    });
    const answer = await response.json();
    assert.equal(response.status, 200, JSON.stringify(answer));
    assert.match(answer.reply, /^250 /, 'the listener took it');
    return answer as SentReport;
  }
  /**
   * Sends a batch to `addresses` (contacts of the client's, opted in) over SMTP; answers its id
   * once every recipient is Delivered.
   */
  async function delivered(client: ApiClient, addresses: string[]): Promise<string> {
    await client.upsert(addresses.map((email) => ({ email, emailOptIn: true })));
    const batchId = await sendBatch(api, client, buildBatch({}, { recipients: addresses.map((to) => ({ to })) }));
    assert.deepEqual(
      (await recipients(client, batchId)).map((r) => r.status),
      addresses.map(() => 'Delivered'),
    );
    return batchId;
  }
  const recipients = async (client: ApiClient, batchId: string): Promise<Recipient[]> =>
    (await client.get(`/email/batch/${batchId}?limit=1000`)).json().recipients;
  const recipient = async (client: ApiClient, batchId: string, email: string) =>
    (await recipients(client, batchId)).find((r) => r.email === email)!;
  const suppression = async (client: ApiClient, email: string) =>
    (await client.get(`/email/suppressions?email=${encodeURIComponent(email)}`)).json().suppressions[0] as
      | { reason: string }
      | undefined;
  const optIn = async (client: ApiClient, email: string) =>
    (await client.get(`/contacts?email=${encodeURIComponent(email)}`)).json().contacts[0].emailOptIn as boolean;
  const metric = async (line: string) =>
    (await api.t.ctx.metrics.metrics())
      .split('\n')
      .find((l) => l.startsWith(line))
      ?.split(' ')
      .at(-1);
  const rowId = async (batchId: string, email: string) =>
    Number(
      (
        await api.t.ctx.db
          .selectFrom('send_recipients')
          .select('id')
          .where('send_id', '=', batchId)
          .where('address', '=', email)
          .executeTakeFirstOrThrow()
      ).id,
    );

  it(
    'a DSN 5.1.1 the sink sends for one of several delivered recipients bounces that one alone, hard and ' +
      'suppressed; a 5.2.2 is soft, not suppressed',
    async () => {
      const batchId = await delivered(alice, ['ada@example.com', 'bob@example.com', 'cy@example.com']);
      // Another account's message to bob, taken by the sink after Alice's: the DSN names Alice's by its Message-ID.
      const carol = await api.client();
      const carolsBatch = await delivered(carol, ['bob@example.com']);

      const bob = await recipient(alice, batchId, 'bob@example.com');
      const diagnostic = '550 5.1.1 <bob@example.com>: Recipient address rejected: User unknown';
      const dsn = await report({
        kind: 'dsn',
        messageId: `${bob.messageId}@mail.localhost`,
        to: 'bob@example.com',
        status: '5.1.1',
        diagnostic,
      });
      assert.deepEqual(dsn.envelope, {
        from: '',
        to: returnPath(trackingKey(api.t.ctx.encryptionKey), BOUNCE_DOMAIN, {
          recipientId: await rowId(batchId, 'bob@example.com'),
          sendId: batchId,
        }),
      });
      assert.equal(dsn.messageId, `<${bob.messageId}@mail.localhost>`);

      const bounced = await recipient(alice, batchId, 'bob@example.com');
      assert.equal(bounced.status, 'Bounce');
      assert.deepEqual(
        bounced.history.map((h) => h.event),
        ['Processed', 'Delivered', 'Bounce'],
      );
      const reply = `5.1.1 (smtp; ${diagnostic})`;
      assert.equal(bounced.history[2].reply, reply);
      assert.equal((await suppression(alice, 'bob@example.com'))?.reason, `hard bounce: ${reply}`);
      for (const other of ['ada@example.com', 'cy@example.com']) {
        assert.equal((await recipient(alice, batchId, other)).status, 'Delivered', other);
        assert.equal(await suppression(alice, other), undefined, other);
      }
      const carols = await recipient(carol, carolsBatch, 'bob@example.com');
      assert.deepEqual(
        [carols.status, carols.history.length],
        ['Delivered', 2],
        "Carol's message to the same address is untouched",
      );
      assert.equal(await suppression(carol, 'bob@example.com'), undefined);

      await report({ kind: 'dsn', to: 'cy@example.com', status: '5.2.2', diagnostic: '552 5.2.2 Mailbox full' });
      const cy = await recipient(alice, batchId, 'cy@example.com');
      assert.equal(cy.status, 'Bounce');
      assert.equal(cy.history.at(-1)!.reply, '5.2.2 (smtp; 552 5.2.2 Mailbox full)');
      assert.equal(await suppression(alice, 'cy@example.com'), undefined);
      assert.equal(await optIn(alice, 'cy@example.com'), true);
      assert.equal((await recipient(alice, batchId, 'ada@example.com')).status, 'Delivered');

      assert.equal(await metric('herald_email_bounces_total{kind="hard",timing="asynchronous"}'), '1');
      assert.equal(await metric('herald_email_bounces_total{kind="soft",timing="asynchronous"}'), '1');
    },
  );

  it(
    'an ARF report the sink mails to the feedback mailbox is a Spam Report that suppresses; the same report ' +
      'posted to /email/complaints is answered as repeated',
    async () => {
      const batchId = await delivered(alice, ['ada@example.com', 'bob@example.com']);
      const arf = await report({ kind: 'arf', to: 'ada@example.com' });
      assert.deepEqual(arf.envelope.to, `${FEEDBACK_MAILBOX}@${BOUNCE_DOMAIN}`);

      const ada = await recipient(alice, batchId, 'ada@example.com');
      assert.equal(ada.status, 'Delivered', 'a complaint is an event of a delivered message');
      assert.deepEqual(
        ada.history.map((h) => h.event),
        ['Processed', 'Delivered', 'Spam Report'],
      );
      assert.equal((await suppression(alice, 'ada@example.com'))?.reason, 'spam report');
      assert.equal(await optIn(alice, 'ada@example.com'), false);
      assert.deepEqual(
        (await recipient(alice, batchId, 'bob@example.com')).history.map((h) => h.event),
        ['Processed', 'Delivered'],
      );
      assert.equal(await optIn(alice, 'bob@example.com'), true);
      assert.equal(await metric('herald_email_complaints_total{via="mail"}'), '1');

      const posted = await api.t.app.inject({
        method: 'POST',
        url: '/email/complaints',
        headers: bearer(ADMIN_TOKEN),
        payload: { arf: Buffer.from(arf.raw).toString('base64') },
      });
      assert.equal(posted.statusCode, 200, posted.body);
      assert.deepEqual(posted.json(), {
        event: 'Spam Report',
        repeated: true,
        feedbackType: 'abuse',
        accountId: alice.account.row.id,
        batchId,
        messageId: ada.messageId,
        email: 'ada@example.com',
      });
      assert.equal((await recipient(alice, batchId, 'ada@example.com')).history.length, 3, 'recorded once');
      assert.equal(await metric('herald_email_complaints_total{via="http"}'), undefined);
    },
  );

  it('mail a client sends to the List-Unsubscribe mailto: of the message the sink took is an Unsubscribe', async () => {
    const batchId = await delivered(alice, ['ada@example.com']);
    const [taken] = sink.received({ to: 'ada@example.com' });
    const listUnsubscribe = (await simpleParser(taken.raw)).headerLines
      .find((h) => h.key === 'list-unsubscribe')!
      .line.replace(/\r\n[ \t]+/g, ' ');
    const mailto = /<mailto:([^>]+)>/.exec(listUnsubscribe)?.[1];
    assert.ok(mailto?.endsWith(`@${BOUNCE_DOMAIN}`), listUnsubscribe);

    // What a mail client does for List-Unsubscribe: a message from the recipient to the address, whatever it says.
    const client = createTransport({ host: '127.0.0.1', port: inbound.port, ignoreTLS: true });
    try {
      const info = await client.sendMail({
        from: 'ada@example.com',
        to: mailto,
        subject: 'unsubscribe',
        text: 'Please unsubscribe me.',
      });
      assert.match(info.response, /^250 /);
    } finally {
      client.close();
    }
    assert.deepEqual(
      (await recipient(alice, batchId, 'ada@example.com')).history.map((h) => h.event),
      ['Processed', 'Delivered', 'Unsubscribe'],
    );
    assert.equal((await suppression(alice, 'ada@example.com'))?.reason, 'unsubscribed');
    assert.equal(await optIn(alice, 'ada@example.com'), false);
  });
});
