import assert from 'node:assert/strict';
import type { LightMyRequestResponse } from 'fastify';
import { afterEach, beforeEach, it } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import { sweep } from '../../src/messaging/retention.ts';
import { forEachDatabase } from '../support/databases.ts';
import { bearer, errorFields } from '../support/app.ts';
import { startApiTest, type ApiTest } from '../support/client.ts';
import { base64, buildBatch } from '../email/support.ts';

const DAY = 24 * 60 * 60_000;
const RETENTION_DAYS = 30;

/** Words a sealed send's read must not hold anywhere: one from its body, one from a tag value. */
const SEALED_WORDS = 'Zebra passcode';
const SEALED_CODE = '739184';

interface Client {
  get(url: string): Promise<LightMyRequestResponse>;
  post(url: string, payload: object): Promise<LightMyRequestResponse>;
  /** Posts a send, expects 202, and answers its QueueId or BatchId. */
  accept(url: string, payload: object): Promise<string>;
}

/**
 * ARCHITECTURE.md, "Reads gain what was sent": `GET /sms/{queueId}` and
 * `GET /email/batch/{batchId}` show the content as accepted, with its `contentState`
 * (available, sealed, purged), the account's only; and `?status=` narrows their recipients.
 */
forEachDatabase((dialect) => {
  let api: ApiTest;
  let alice: Client;
  let bob: Client;
  // Tokens that outlive the retention the purge tests move the clock through.
  const client = async (): Promise<Client> => {
    const auth = bearer(await api.t.tokenFor(await api.t.createAccount(), 'LongLive'));
    return {
      get: (url) => api.t.app.inject({ method: 'GET', url, headers: auth }),
      post: (url, payload) => api.t.app.inject({ method: 'POST', url, payload, headers: auth }),
      async accept(url, payload) {
        const response = await api.t.app.inject({ method: 'POST', url, payload, headers: auth });
        assert.equal(response.statusCode, 202, response.body);
        const { data } = response.json();
        return (data.QueueId ?? data.BatchId) as string;
      },
    };
  };
  beforeEach(async () => {
    api = await startApiTest(dialect, {
      clock: new ManualClock(Date.UTC(2026, 0, 5, 12)),
      env: { SMS_TRANSPORT: 'sandbox:?fail=^9198111', EMAIL_TRANSPORT: 'sandbox:?bounce=^gone@' },
    });
    alice = await client();
    bob = await client();
  });
  afterEach(() => api.close());

  const read = async (account: Client, path: string) => {
    const response = await account.get(path);
    assert.equal(response.statusCode, 200, response.body);
    return response.json();
  };
  const tag = (tagName: string, tagValue: string) => ({ tagName, tagValue });
  /** An SMS batch of HERALD's saying Hi to these numbers. */
  const smsTo = (...numbers: string[]) => ({
    senderName: 'HERALD',
    body: 'Hi',
    recipients: numbers.map((mobileNo) => ({ mobileNo })),
  });
  const numbersOf = (sms: { recipients: Array<{ recipient: string }> }) => sms.recipients.map((r) => r.recipient);
  const addressesOf = (batch: { recipients: Array<{ email: string }> }) => batch.recipients.map((r) => r.email);
  const purge = async () => {
    api.clock.advance((RETENTION_DAYS + 1) * DAY);
    const report = await sweep(api.t.ctx.database, api.clock.now(), RETENTION_DAYS);
    assert.ok(report.sends > 0, 'the sweep purged the sends');
  };

  it('shows an SMS send its sender name and body as the request gave them', async () => {
    const queueId = await alice.accept('/sms/batch', {
      senderName: 'HERALD',
      body: 'Hello [firstName], your order shipped',
      recipients: [{ mobileNo: '919812345601', personalizationSubstitutionTags: [tag('[firstName]', 'Ada')] }],
    });
    await api.drain();
    const sms = await read(alice, `/sms/${queueId}`);
    assert.equal(sms.contentState, 'available');
    assert.deepEqual(sms.content, { senderName: 'HERALD', body: 'Hello [firstName], your order shipped' });
  });

  it("shows an email batch its sender, subject, preheader and HTML as accepted, a campaign's too", async () => {
    const html = '<p style="color:#333">Dear [firstName], <img src="https://images.example.com/a.png" alt="a"></p>';
    const preHeaderText = 'Read me, [firstName]';
    const batchId = await alice.accept('/email/batch', buildBatch({ preHeaderText, emailBody: base64(html) }));
    await api.drain();
    const batch = await read(alice, `/email/batch/${batchId}`);
    assert.equal(batch.contentState, 'available');
    assert.deepEqual(batch.content, {
      senderFrom: 'news@mail.localhost',
      senderName: 'Herald News',
      subject: 'Hello [firstName]',
      preHeaderText,
      html,
    });

    const campaign = await alice.post('/email/campaigns', { name: 'Spring', html: '<h1>Spring [firstName]</h1>' });
    assert.equal(campaign.statusCode, 201, campaign.body);
    const { emailCampaignId } = campaign.json();
    const fromCampaign = await alice.accept('/email/batch', buildBatch({ emailBody: undefined, emailCampaignId }));
    const shown = await read(alice, `/email/batch/${fromCampaign}`);
    assert.equal(shown.contentState, 'available');
    assert.equal(shown.content.html, '<h1>Spring [firstName]</h1>');
    assert.equal(shown.content.preHeaderText, null);
  });

  it('never shows the text of an isBodyEncrypted SMS, in no field: its content reads sealed', async () => {
    const batch = await alice.accept('/sms/batch', {
      senderName: 'HERALD',
      body: `${SEALED_WORDS}: [code]`,
      isBodyEncrypted: true,
      recipients: [{ mobileNo: '919812345602', personalizationSubstitutionTags: [tag('[code]', SEALED_CODE)] }],
    });
    const single = await alice.accept('/sms/single', {
      recipient: '919812345603',
      senderName: 'HERALD',
      body: `${SEALED_WORDS}: [code]`,
      isBodyEncrypted: true,
      personalizationSubstitutionTags: [tag('[code]', SEALED_CODE)],
    });
    await api.drain();
    for (const queueId of [batch, single]) {
      const response = await alice.get(`/sms/${queueId}`);
      assert.equal(response.statusCode, 200, response.body);
      const sms = response.json();
      assert.equal(sms.contentState, 'sealed');
      assert.deepEqual(sms.content, { senderName: null, body: null });
      assert.deepEqual(sms.totals, { Delivered: 1 }, 'it was sent');
      for (const secret of [SEALED_WORDS, SEALED_CODE]) {
        assert.ok(!response.body.includes(secret), `${secret} is in ${response.body}`);
      }
    }
  });

  it('reads purged, with no text, once retention removed what an SMS send and an email batch said', async () => {
    const queueId = await alice.accept('/sms/batch', { ...smsTo('919812345604'), body: 'Walrus reminder' });
    const walrus = { subject: 'Walrus', emailBody: base64('<p>Walrus</p>') };
    const batchId = await alice.accept('/email/batch', buildBatch(walrus));
    await api.drain();
    assert.equal((await read(alice, `/sms/${queueId}`)).contentState, 'available');
    await purge();

    const sms = await alice.get(`/sms/${queueId}`);
    assert.equal(sms.statusCode, 200, sms.body);
    assert.equal(sms.json().contentState, 'purged');
    assert.deepEqual(sms.json().content, { senderName: null, body: null });
    assert.deepEqual(sms.json().totals, { Delivered: 1 }, 'what became of it stays');
    const email = await alice.get(`/email/batch/${batchId}`);
    assert.equal(email.statusCode, 200, email.body);
    assert.equal(email.json().contentState, 'purged');
    const none = { senderFrom: null, senderName: null, subject: null, preHeaderText: null, html: null };
    assert.deepEqual(email.json().content, none);
    for (const response of [sms, email]) assert.ok(!response.body.includes('Walrus'), response.body);
  });

  it("answers 404 for another account's send, its content and its recipients by status", async () => {
    const queueId = await alice.accept('/sms/batch', { ...smsTo('919812345605'), body: 'For Alice only' });
    const batchId = await alice.accept('/email/batch', buildBatch());
    await api.drain();
    const paths = [`/sms/${queueId}`, `/email/batch/${batchId}`];
    for (const path of [...paths, ...paths.map((p) => `${p}?status=Delivered`)]) {
      const response = await bob.get(path);
      assert.equal(response.statusCode, 404, `${path}: ${response.body}`);
      assert.equal(response.json().status, 'Failure');
      assert.ok(!response.body.includes('For Alice only') && !response.body.includes('Dear'), response.body);
    }
  });

  it('narrows the recipients to one status word with ?status=, a page at a time, totals unchanged', async () => {
    const numbers = ['919812345606', '919811100001', '919812345607', '919811100002', '919812345608'];
    const queueId = await alice.accept('/sms/batch', smsTo(...numbers));
    const addresses = ['ada@example.com', 'gone@example.com', 'bea@example.com'];
    const batchId = await alice.accept('/email/batch', buildBatch({}, { recipients: addresses.map((to) => ({ to })) }));
    await api.drain();

    const failed = await read(alice, `/sms/${queueId}?status=Failed`);
    assert.deepEqual(numbersOf(failed), ['919811100001', '919811100002']);
    assert.deepEqual(failed.totals, { Delivered: 3, Failed: 2 }, "the totals are the whole send's");
    const first = await read(alice, `/sms/${queueId}?status=Delivered&limit=2`);
    assert.deepEqual(numbersOf(first), ['919812345606', '919812345607']);
    const second = await read(alice, `/sms/${queueId}?status=Delivered&limit=2&cursor=${first.nextCursor}`);
    assert.deepEqual(numbersOf(second), ['919812345608']);
    assert.equal(second.nextCursor, null);
    assert.deepEqual((await read(alice, `/sms/${queueId}?status=NotSent`)).recipients, []);

    const bounced = await read(alice, `/email/batch/${batchId}?status=Bounce`);
    assert.deepEqual(addressesOf(bounced), ['gone@example.com']);
    const delivered = await read(alice, `/email/batch/${batchId}?status=Delivered`);
    assert.deepEqual(addressesOf(delivered), ['ada@example.com', 'bea@example.com']);
  });

  it('finds the recipients of a scheduled send by the word its read shows them at, Scheduled', async () => {
    const scheduleDateTime = new Date(api.clock.now() + DAY).toISOString();
    const queueId = await alice.accept('/sms/batch', { ...smsTo('919812345609'), scheduleDateTime });
    const later = { recipients: [{ to: 'later@example.com' }] };
    const batchId = await alice.accept('/email/batch', buildBatch({ scheduleDateTime }, later));
    // An email batch has its recipients once expanded; a request's own are there at once.
    const sms = await read(alice, `/sms/${queueId}?status=Scheduled`);
    assert.deepEqual(
      sms.recipients.map((r: { recipient: string; status: string }) => [r.recipient, r.status]),
      [['919812345609', 'Scheduled']],
    );
    assert.deepEqual((await read(alice, `/sms/${queueId}?status=Queued`)).recipients, []);
    const email = await read(alice, `/email/batch/${batchId}?status=Scheduled`);
    assert.deepEqual(
      email.recipients.map((r: { email: string; status: string }) => [r.email, r.status]),
      [['later@example.com', 'Scheduled']],
    );
    assert.deepEqual((await read(alice, `/email/batch/${batchId}?status=Queued`)).recipients, []);
  });

  it("refuses a status that is not a word of the channel in the contract's error shape", async () => {
    const queueId = await alice.accept('/sms/batch', smsTo('919812345610'));
    const batchId = await alice.accept('/email/batch', buildBatch());
    const refused = [
      `/sms/${queueId}?status=Bounce`,
      `/sms/${queueId}?status=delivered`,
      `/email/batch/${batchId}?status=NotSent`,
      `/email/batch/${batchId}?status=Open`,
      `/email/batch/${batchId}?status=`,
    ];
    for (const path of refused) {
      const response = await alice.get(path);
      assert.equal(response.statusCode, 400, `${path}: ${response.body}`);
      assert.equal(response.json().status, 'Failure');
      assert.deepEqual(errorFields(response), ['status'], response.body);
      assert.match(response.json().errors[0].message, /must be one of Scheduled, Queued, Cancelled/);
    }
  });
});
