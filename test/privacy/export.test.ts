import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import { exportPerson } from '../../src/privacy/export.ts';
import { forEachDatabase } from '../support/databases.ts';
import { startApiTest, type ApiClient, type ApiTest } from '../support/client.ts';
import { buildBatch } from '../email/support.ts';

// GET /privacy/export (ARCHITECTURE.md, "Data rights and management"; docs/privacy.md, "Export").
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

  const ok = async (client: ApiClient, url: string) => {
    const response = await client.get(url);
    assert.equal(response.statusCode, 200, response.body);
    return response.json();
  };
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
  const email = (client: ApiClient, ...addresses: string[]) =>
    sent(client, '/email/batch', buildBatch({}, { recipients: addresses.map((to) => ({ to })) }));
  const ids = (rows: Array<{ queueId?: string; batchId?: string }>) => rows.map((row) => row.queueId ?? row.batchId);
  const ada = {
    mobileCountryCode: '91',
    mobileNumber: '9812345601',
    email: 'ada@example.com',
    mobileOptIn: true,
    emailOptIn: true,
  };

  it('exports the person a mobile names: its contacts, the address they hold, messages, clicks and more', async () => {
    const customers = await alice.createList('Customers');
    const [contactId] = (await alice.upsert([ada], { listId: customers })).inserted.contactIds;
    const landing = await alice.post('/landing-pages', { name: 'Offer', url: 'https://shop.example.com/offer' });
    const linked = await sent(alice, '/sms/single', {
      recipient: '919812345601',
      senderName: 'HERALD',
      body: 'Our sale:',
      landingPageId: landing.json().landingPageId,
    });
    const [part] = (await ok(alice, '/sandbox/sms?recipient=919812345601')).messages;
    const code = /\/l\/([A-Za-z0-9]{8})/.exec(part.text)![1];
    const click = await api.t.app.inject({ method: 'GET', url: `/l/${code}`, headers: { 'user-agent': 'Phone/1' } });
    assert.equal(click.statusCode, 302);
    const clickedAt = new Date(api.clock.now()).toISOString();
    const batch = await sms(alice, '919812345601', '919812345602');
    const mailed = await email(alice, 'ada@example.com');
    await email(alice, 'grace@example.com');
    assert.equal((await alice.post('/sms/suppressions', { number: '919812345601' })).statusCode, 201);
    assert.equal((await alice.post('/email/suppressions', { email: 'ada@example.com' })).statusCode, 201);
    await api.t.ctx.db
      .insertInto('sms_inbound')
      .values({
        account_id: alice.account.row.id,
        sender: '919812345601',
        destination: 'HERALD',
        text: 'Thanks',
        contact_id: contactId,
        received_at: api.clock.now(),
      })
      .execute();

    const found = await ok(alice, '/privacy/export?mobile=919812345601');
    assert.deepEqual(found.contacts, [await alice.contact(contactId)]);
    assert.deepEqual(found.lists.map((list: { name: string }) => list.name).sort(), ['All contacts', 'Customers']);
    assert.deepEqual(ids(found.sms), [linked, batch]);
    const read = (await ok(alice, `/sms/${batch}`)).recipients.find(
      (r: { recipient: string }) => r.recipient === '919812345601',
    );
    assert.deepEqual(
      [found.sms[1].messageId, found.sms[1].status, found.sms[1].history, found.sms[1].parts],
      [read.messageId, 'Delivered', read.history, 1],
    );
    assert.deepEqual(found.sms[1].content, { senderName: 'HERALD', body: 'Hello' });
    assert.deepEqual(ids(found.email), [mailed], 'the address its contact holds, one hop from the mobile');
    const emailRead = (await ok(alice, `/email/batch/${mailed}`)).recipients[0];
    assert.deepEqual([found.email[0].messageId, found.email[0].history], [emailRead.messageId, emailRead.history]);
    assert.equal(found.email[0].content.subject, 'Hello [firstName]');
    assert.deepEqual(found.clicks, [
      {
        channel: 'sms',
        messageId: found.sms[0].messageId,
        url: 'https://shop.example.com/offer',
        at: clickedAt,
        userAgent: 'Phone/1',
      },
    ]);
    assert.deepEqual(
      found.suppressions.map((s: { channel: string; address: string }) => [s.channel, s.address]),
      [
        ['sms', '919812345601'],
        ['email', 'ada@example.com'],
      ],
    );
    assert.deepEqual(found.inbound, [
      { from: '919812345601', to: 'HERALD', text: 'Thanks', at: new Date(api.clock.now()).toISOString(), contactId },
    ]);
    assert.equal(found.nextCursor, null);

    // The same person by the address, in any case, and by the number with a trunk 0.
    assert.deepEqual(await ok(alice, '/privacy/export?email=ADA%40Example.com'), found);
    assert.deepEqual(await ok(alice, '/privacy/export?mobile=9109812345601'), found);
  });

  it('exports the messages to a number no contact holds, and nothing of another account', async () => {
    const alices = await sms(alice, '919812345602');
    const bobs = await sms(bob, '919812345602', '919812345603');
    await email(bob, 'ada@example.com');
    const found = await ok(alice, '/privacy/export?mobile=919812345602');
    assert.deepEqual([found.contacts, ids(found.sms), found.email], [[], [alices], []]);
    assert.equal(found.sms[0].recipient, '919812345602');
    assert.deepEqual(ids((await ok(bob, '/privacy/export?mobile=919812345602')).sms), [bobs]);

    await alice.upsert([ada]);
    await email(alice, 'ada@example.com');
    await alice.post('/sms/suppressions', { number: '919812345601' });
    const empty = {
      contacts: [],
      lists: [],
      sms: [],
      email: [],
      clicks: [],
      suppressions: [],
      inbound: [],
      verifications: [],
      nextCursor: null,
    };
    assert.deepEqual(await ok(bob, '/privacy/export?mobile=919812345601'), empty);
    assert.deepEqual(await ok(alice, '/privacy/export?mobile=919812345603'), empty);
    assert.equal((await ok(bob, '/privacy/export?email=ada%40example.com')).email.length, 1, "bob's own batch only");
  });

  it('shows what was sent with its tags, and never the text or tags of an encrypted SMS', async () => {
    const tags = [{ tagName: '[code]', tagValue: '482913' }];
    const single = { recipient: '919812345601', senderName: 'HERALD', personalizationSubstitutionTags: tags };
    const plain = await sent(alice, '/sms/single', { ...single, body: 'Your code is [code]' });
    const sealed = await sent(alice, '/sms/single', { ...single, body: 'Secret [code]', isBodyEncrypted: true });
    const found = await ok(alice, '/privacy/export?mobile=919812345601');
    assert.deepEqual(
      found.sms.map((m: { queueId: string; contentState: string; content: object; tags: object }) => [
        m.queueId,
        m.contentState,
        m.content,
        m.tags,
      ]),
      [
        [plain, 'available', { senderName: 'HERALD', body: 'Your code is [code]' }, { '[code]': '482913' }],
        [sealed, 'sealed', { senderName: null, body: null }, null],
      ],
    );
    assert.ok(!JSON.stringify(found).includes('Secret'));
  });

  it("exports the person's verifications, by the number or the address their contact holds", async () => {
    await alice.upsert([ada]);
    const start = async (client: ApiClient, body: object) => {
      const response = await client.post('/verify', body);
      assert.equal(response.statusCode, 201, response.body);
      return response.json().verificationId as string;
    };
    const bySms = await start(alice, { to: '919812345601' });
    api.clock.advance(1000);
    const byEmail = await start(alice, { to: 'ada@example.com', channel: 'email' });
    await start(alice, { to: '919812345699' });
    await start(bob, { to: '919812345601' });
    const found = await ok(alice, '/privacy/export?mobile=919812345601');
    assert.deepEqual(
      found.verifications.map((v: { verificationId: string; to: string; status: string }) => [v.verificationId, v.to]),
      [
        [bySms, '919812345601'],
        [byEmail, 'ada@example.com'],
      ],
    );
    assert.deepEqual(Object.keys(found.verifications[0]).sort(), [
      'attemptsLeft',
      'channel',
      'createdAt',
      'expiresAt',
      'sendAttempts',
      'status',
      'to',
      'verificationId',
    ]);
    assert.ok(!JSON.stringify(found.verifications).includes('code'), 'no code nor its hash');
  });

  it('pages messages, SMS then email, with the person carried by the first page only', async () => {
    await alice.upsert([ada]);
    const smsIds = [
      await sms(alice, '919812345601'),
      await sms(alice, '919812345601'),
      await sms(alice, '919812345601'),
    ];
    const emailIds = [await email(alice, 'ada@example.com'), await email(alice, 'ada@example.com')];
    const page = (cursor?: string, limit = 2) =>
      exportPerson(api.t.ctx.db, dialect, {
        accountId: alice.account.row.id,
        given: { mobile: '919812345601' },
        now: api.clock.now(),
        cursor,
        limit,
      });
    const first = await page();
    assert.deepEqual([ids(first.sms), ids(first.email), first.contacts.length], [smsIds.slice(0, 2), [], 1]);
    const second = await page(first.nextCursor!);
    assert.deepEqual(
      [ids(second.sms), ids(second.email), second.contacts],
      [smsIds.slice(2), emailIds.slice(0, 1), []],
    );
    const third = await page(second.nextCursor!);
    assert.deepEqual([ids(third.sms), ids(third.email), third.nextCursor], [[], emailIds.slice(1), null]);

    // A page that ends with the last SMS still points at the emails.
    const full = await page(undefined, 3);
    assert.deepEqual([ids(full.sms), full.email], [smsIds, []]);
    assert.deepEqual(ids((await page(full.nextCursor!, 3)).email), emailIds);
    assert.equal((await page(undefined, 5)).nextCursor, null);

    // Through the route, a later page carries no contacts, lists or suppressions.
    const later = await ok(alice, `/privacy/export?mobile=919812345601&cursor=${first.nextCursor}`);
    assert.deepEqual([later.contacts, later.lists, later.suppressions, ids(later.sms)], [[], [], [], smsIds.slice(2)]);
    assert.equal((await ok(alice, '/privacy/export?mobile=919812345601')).sms.length, 3, '1,000 a page');
  });

  it('refuses anything but exactly one good mobile or email, and a cursor it did not give', async () => {
    const fields = async (url: string) => {
      const response = await alice.get(url);
      assert.equal(response.statusCode, 400, `${url}: ${response.body}`);
      const body = response.json();
      assert.equal(body.status, 'Failure');
      return body.errors.map((e: { field: string }) => e.field);
    };
    assert.deepEqual(await fields('/privacy/export'), ['mobile']);
    assert.deepEqual(await fields('/privacy/export?mobile=919812345601&email=ada%40example.com'), ['email']);
    assert.deepEqual(await fields('/privacy/export?mobile=%2B919812345601'), ['mobile']);
    assert.deepEqual(await fields('/privacy/export?email=not-an-address'), ['email']);
    assert.deepEqual(await fields('/privacy/export?email=ada%40example.com&cursor=bm9wZQ'), ['cursor']);
    const phase = Buffer.from('2.0').toString('base64url');
    assert.deepEqual(await fields(`/privacy/export?email=ada%40example.com&cursor=${phase}`), ['cursor']);
    assert.equal(
      (await api.t.app.inject({ method: 'GET', url: '/privacy/export?mobile=919812345601' })).statusCode,
      401,
    );
  });
});
