import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { MAX_MISSES_PER_ADDRESS, MISS_WINDOW_MS } from '../../src/links/routes.ts';
import { Worker } from '../../src/queue/worker.ts';
import { SMS_SEND_KIND } from '../../src/sms/accept.ts';
import { smsSendHandler } from '../../src/sms/send.ts';
import { recipientZone } from '../../src/messaging/recipient-zone.ts';
import type { SmsTransport } from '../../src/sms/transport.ts';
import { forEachDatabase } from '../support/databases.ts';
import { ADMIN_TOKEN, bearer, errorFields } from '../support/app.ts';
import { startApiTest, type ApiClient, type ApiTest } from '../support/client.ts';

/** The service's own links in tests: PUBLIC_URL is left at its default. */
const SERVICE_LINK = /http:\/\/localhost:8080\/l\/([0-9A-Za-z]{8})/;
const BROWSER = 'Mozilla/5.0 (iPhone; CPU iPhone OS 18_0 like Mac OS X)';

interface Recipient {
  recipient: string;
  parts: number;
  clicks: Array<{ at: string; userAgent: string | null }>;
}

forEachDatabase((dialect) => {
  let api: ApiTest;
  let alice: ApiClient;
  let offer: string;
  beforeEach(async () => {
    api = await startApiTest(dialect);
    alice = await api.client();
    offer = await landingPage(alice, 'Offer', 'https://shop.example.com/offer?from=sms');
  });
  afterEach(() => api.close());

  async function landingPage(client: ApiClient, name: string, url: string): Promise<string> {
    const response = await client.post('/landing-pages', { name, url });
    assert.equal(response.statusCode, 201, response.body);
    return response.json().landingPageId;
  }
  const send = async (client: ApiClient, path: '/sms/single' | '/sms/batch', body: object) => {
    const response = await client.post(path, body);
    assert.equal(response.statusCode, 202, response.body);
    await api.drain();
    return response.json().data.QueueId as string;
  };
  /** Each recipient's whole text, parts joined. */
  const texts = async (client: ApiClient) => {
    const messages = (await client.get('/sandbox/sms?limit=1000')).json().messages as Array<{
      recipient: string;
      part: number;
      text: string;
    }>;
    const byRecipient = new Map<string, string[]>();
    for (const m of messages.sort((a, b) => a.part - b.part))
      byRecipient.set(m.recipient, [...(byRecipient.get(m.recipient) ?? []), m.text]);
    return new Map([...byRecipient].map(([recipient, parts]) => [recipient, parts.join('')]));
  };
  const open = (path: string, headers: Record<string, string> = {}) =>
    api.t.app.inject({ method: 'GET', url: path, headers: { 'user-agent': BROWSER, ...headers } });
  const read = async (client: ApiClient, queueId: string) =>
    (await client.get(`/sms/${queueId}`)).json() as { clicks: number; partsBilled: number; recipients: Recipient[] };
  const registerShortener = async (client: ApiClient, domain: string) => {
    const response = await api.t.app.inject({
      method: 'POST',
      url: `/admin/accounts/${client.account.row.id}/shortener-domains`,
      headers: bearer(ADMIN_TOKEN),
      payload: { domain },
    });
    assert.equal(response.statusCode, 201, response.body);
  };

  it(
    'stops an address that keeps opening unknown links (429 with Retry-After), never one that opens real ones, ' +
      'nor another address',
    async () => {
      await send(alice, '/sms/single', {
        recipient: '919812345678',
        senderName: 'HERALD',
        body: 'Our sale starts today:',
        landingPageId: offer,
      });
      const path = new URL(SERVICE_LINK.exec((await texts(alice)).get('919812345678')!)![0]).pathname;
      const from = (remoteAddress: string, url: string) =>
        api.t.app.inject({ method: 'GET', url, remoteAddress, headers: { 'user-agent': BROWSER } });
      for (let i = 0; i < MAX_MISSES_PER_ADDRESS + 50; i++)
        assert.equal((await from('198.51.100.7', path)).statusCode, 302, 'real links never count');
      for (let i = 0; i < MAX_MISSES_PER_ADDRESS; i++)
        assert.equal((await from('203.0.113.9', `/l/Zz${String(i).padStart(6, '0')}`)).statusCode, 404);
      const refused = await from('203.0.113.9', path);
      assert.equal(refused.statusCode, 429, 'refused, a real link too, once the misses are used up');
      assert.equal(Number(refused.headers['retry-after']), MISS_WINDOW_MS / 1000);
      assert.equal((await from('198.51.100.7', path)).statusCode, 302, 'another address is not');
      api.clock.advance(MISS_WINDOW_MS);
      assert.equal(
        (await from('203.0.113.9', path)).statusCode,
        302,
        'and once its oldest miss is a window old, it opens again',
      );
    },
  );

  it('counts the misses of an IPv6 client by its /64, as one client', async () => {
    const miss = (remoteAddress: string, i: number) =>
      api.t.app.inject({ method: 'GET', url: `/l/Zz${String(i).padStart(6, '0')}`, remoteAddress });
    // Each miss from another address of the same /64: 2^64 addresses are one subscriber's.
    for (let i = 0; i < MAX_MISSES_PER_ADDRESS; i++)
      assert.equal((await miss(`2001:db8:7:8::${(i + 1).toString(16)}`, i)).statusCode, 404);
    assert.equal((await miss('2001:db8:7:8:ffff:ffff:ffff:ffff', 0)).statusCode, 429);
    assert.equal((await miss('2001:db8:7:9::1', 0)).statusCode, 404, 'the next /64 is another client');
  });

  it(
    'puts the landing page link after the text, leads it to the ' + 'page (302) and shows the click on its recipient',
    async () => {
      const queueId = await send(alice, '/sms/single', {
        recipient: '919812345678',
        senderName: 'HERALD',
        body: 'Our sale starts today:',
        landingPageId: offer,
      });
      const text = (await texts(alice)).get('919812345678')!;
      const [link, code] = SERVICE_LINK.exec(text)!;
      assert.equal(text, `Our sale starts today: ${link}`);
      assert.deepEqual((await read(alice, queueId)).recipients[0].clicks, [], 'no click before one');

      api.clock.advance(60_000);
      const opened = await open(new URL(link).pathname);
      assert.equal(opened.statusCode, 302);
      assert.equal(opened.headers.location, 'https://shop.example.com/offer?from=sms');
      assert.equal(opened.headers['cache-control'], 'no-store');
      await open(`/l/${code}`, { 'user-agent': '' });
      // A HEAD (a link previewer checking it) answers the same and is no click.
      const checked = await api.t.app.inject({ method: 'HEAD', url: `/l/${code}` });
      assert.deepEqual(
        [checked.statusCode, checked.headers.location],
        [302, 'https://shop.example.com/offer?from=sms'],
      );

      const after = await read(alice, queueId);
      assert.equal(after.clicks, 2);
      assert.deepEqual(after.recipients[0].clicks, [
        { at: new Date(api.clock.now()).toISOString(), userAgent: BROWSER },
        { at: new Date(api.clock.now()).toISOString(), userAgent: '' },
      ]);
    },
  );

  it(
    'gives each recipient of a batch a link of its own, across ' + 'pages, and attributes each click to its recipient',
    async () => {
      // 501 recipients: two pages of links.
      const recipients = Array.from({ length: 501 }, (_, i) => ({
        mobileNo: `9198${String(12_000_000 + i).padStart(8, '0')}`,
      }));
      const queueId = await send(alice, '/sms/batch', {
        recipients,
        senderName: 'HERALD',
        body: 'Hi [firstName], see [landingPageUrl] before Friday',
        landingPageId: offer,
      });
      const sent = await texts(alice);
      assert.equal(sent.size, 501);
      const codes = new Map([...sent].map(([recipient, text]) => [recipient, SERVICE_LINK.exec(text)![1]]));
      assert.equal(new Set(codes.values()).size, 501, 'a code per recipient');
      const [first, last] = [recipients[0].mobileNo, recipients[500].mobileNo];
      assert.equal(
        sent.get(first),
        `Hi , see http://localhost:8080/l/${codes.get(first)} before Friday`,
        'in the tag’s place, not appended',
      );

      assert.equal((await open(`/l/${codes.get(last)}`)).statusCode, 302);
      const page = (await (await alice.get(`/sms/${queueId}?limit=1000`)).json()) as {
        clicks: number;
        recipients: Recipient[];
      };
      assert.equal(page.clicks, 1);
      const clicked = page.recipients.filter((r) => r.clicks.length > 0);
      assert.deepEqual(
        clicked.map((r) => [r.recipient, r.clicks.length]),
        [[last, 1]],
      );
    },
  );

  it(
    'shares one link among a send’s recipients with ' + 'isUniqueUrl false, and counts its clicks on the send',
    async () => {
      const queueId = await send(alice, '/sms/batch', {
        recipients: [{ mobileNo: '919812300001' }, { mobileNo: '919812300002' }],
        senderName: 'HERALD',
        body: 'Sale!',
        landingPageId: offer,
        shortner: { isUniqueUrl: false },
      });
      const links = [...(await texts(alice)).values()].map((text) => SERVICE_LINK.exec(text)![0]);
      assert.equal(links.length, 2);
      assert.equal(links[0], links[1]);
      for (let i = 0; i < 3; i++) assert.equal((await open(new URL(links[0]).pathname)).statusCode, 302);
      const after = await read(alice, queueId);
      assert.equal(after.clicks, 3);
      assert.deepEqual(
        after.recipients.map((r) => r.clicks),
        [[], []],
        'a shared link’s clicks are no one recipient’s',
      );
    },
  );

  it('counts the link in the parts: 150 characters and the link take two parts', async () => {
    const queueId = await send(alice, '/sms/single', {
      recipient: '919812345678',
      senderName: 'HERALD',
      body: 'x'.repeat(150),
      landingPageId: offer,
    });
    const result = await read(alice, queueId);
    assert.deepEqual([result.recipients[0].parts, result.partsBilled], [2, 2]);
    assert.equal((await texts(alice)).get('919812345678')!.length, 150 + 1 + 'http://localhost:8080/l/'.length + 8);
  });

  it('refuses another account’s landing page with 422 as an unknown one, and queues nothing', async () => {
    const bob = await api.client();
    const theirs = await landingPage(bob, 'Bob’s offer', 'https://bob.example');
    for (const landingPageId of [theirs, '0b6c1c1e-8f4e-4c49-9a51-3f3d2c1b0a99']) {
      const response = await alice.post('/sms/batch', {
        recipients: [{ mobileNo: '919812345678' }],
        senderName: 'HERALD',
        body: 'hi',
        landingPageId,
      });
      assert.equal(response.statusCode, 422);
      assert.deepEqual(errorFields(response), ['landingPageId']);
    }
    await api.drain();
    assert.equal((await texts(alice)).size, 0);
  });

  it(
    'never leads one account’s code anywhere through another ' + 'account’s shortener host, nor reads its clicks',
    async () => {
      const bob = await api.client();
      await registerShortener(alice, 'go.alice.example');
      await registerShortener(bob, 'go.bob.example');
      const aliceSend = await send(alice, '/sms/single', {
        recipient: '919812345678',
        senderName: 'HERALD',
        body: 'A',
        landingPageId: offer,
        shortner: { shortnerUrl: 'https://Go.Alice.example/' },
      });
      const bobsPage = await landingPage(bob, 'Offer', 'https://bob.example/');
      await send(bob, '/sms/single', {
        recipient: '919812345678',
        senderName: 'HERALD',
        body: 'B',
        landingPageId: bobsPage,
      });

      const aliceText = (await texts(alice)).get('919812345678')!;
      const [, aliceCode] = /^A https:\/\/go\.alice\.example\/([0-9A-Za-z]{8})$/.exec(aliceText)!;
      const [, bobCode] = SERVICE_LINK.exec((await texts(bob)).get('919812345678')!)!;

      const onAlices = await open(`/${aliceCode}`, { host: 'go.alice.example' });
      assert.deepEqual(
        [onAlices.statusCode, onAlices.headers.location],
        [302, 'https://shop.example.com/offer?from=sms'],
      );
      for (const [code, host] of [
        [aliceCode, 'go.bob.example'],
        [bobCode, 'go.alice.example'],
      ]) {
        for (const path of [`/${code}`, `/l/${code}`]) {
          const response = await open(path, { host });
          assert.equal(response.statusCode, 404, `${path} on ${host}`);
          assert.equal(response.json().status, 'Failure');
        }
      }
      // The service's own host takes any code it gave out; an unknown one records nothing.
      assert.equal((await open(`/l/${aliceCode}`)).statusCode, 302);
      assert.equal((await open('/l/Zz9Zz9Zz')).statusCode, 404);
      // Other routes and unknown paths on a shortener host are what they are anywhere.
      assert.equal((await open('/healthz', { host: 'go.alice.example' })).statusCode, 200);
      assert.equal((await open('/a/b', { host: 'go.alice.example' })).statusCode, 404);

      assert.equal((await read(alice, aliceSend)).clicks, 2);
      assert.equal((await bob.get(`/sms/${aliceSend}`)).statusCode, 404);
    },
  );

  it('refuses a shortnerUrl that is not a shortener domain registered for the account with 422', async () => {
    const bob = await api.client();
    await registerShortener(bob, 'go.bob.example');
    for (const shortnerUrl of [
      'https://go.bob.example',
      'https://unregistered.example',
      'https://go.bob.example/path',
      'not a url',
    ]) {
      const response = await alice.post('/sms/single', {
        recipient: '919812345678',
        senderName: 'HERALD',
        body: 'hi',
        landingPageId: offer,
        shortner: { shortnerUrl },
      });
      assert.equal(response.statusCode, 422, shortnerUrl);
      assert.deepEqual(errorFields(response), ['shortner.shortnerUrl'], shortnerUrl);
    }
  });

  it(
    'writes a page’s codes before the page is submitted, and a page submitted again after a failure carries the ' +
      'same codes, as parts an SMSC took from the first try are joined with the next',
    async () => {
      // A transport of the test's own: it looks each text's code up as another connection sees
      // the database (committed rows only), and its first submit dies as a dropped connection would.
      const submitted: Array<{ attempt: number; code: string; stored: boolean }> = [];
      let attempt = 0;
      const transport: SmsTransport = {
        async submit(messages) {
          attempt++;
          for (const message of messages) {
            const [, code] = SERVICE_LINK.exec(message.segmented.parts.map((p) => p.text).join(''))!;
            const stored = await api.t.ctx.database.reads
              .selectFrom('links')
              .select('code')
              .where('code', '=', code)
              .executeTakeFirst();
            submitted.push({ attempt, code, stored: stored !== undefined });
          }
          if (attempt === 1) throw new Error('the connection to the SMSC dropped');
          return messages.map((m) => ({ accepted: true as const, operatorMessageIds: [m.messageId] }));
        },
        async close() {},
      };
      const worker = new Worker({ database: api.t.ctx.database, clock: api.clock });
      worker.register(SMS_SEND_KIND, smsSendHandler({ ...api.t.ctx, transport, zoneOf: recipientZone }), {
        concurrency: 1,
      });
      const accepted = await alice.post('/sms/batch', {
        recipients: [{ mobileNo: '919812300001' }, { mobileNo: '919812300002' }],
        senderName: 'HERALD',
        body: 'Sale',
        landingPageId: offer,
      });
      assert.equal(accepted.statusCode, 202);
      await worker.drain();
      api.clock.advance(3_600_000);
      await worker.drain();

      assert.deepEqual(
        submitted.map((s) => [s.attempt, s.stored]),
        [
          [1, true],
          [1, true],
          [2, true],
          [2, true],
        ],
      );
      assert.deepEqual(
        submitted.slice(2).map((s) => s.code),
        submitted.slice(0, 2).map((s) => s.code),
        'the same codes for the page submitted again',
      );
      for (const { code } of submitted) assert.equal((await open(`/l/${code}`)).statusCode, 302, code);
      assert.deepEqual(
        (await read(alice, accepted.json().data.QueueId)).recipients.map((r) => r.clicks.length),
        [2, 2],
      );
    },
  );

  it('takes a deleted account’s links and clicks with it', async () => {
    await send(alice, '/sms/single', {
      recipient: '919812345678',
      senderName: 'HERALD',
      body: 'Sale',
      landingPageId: offer,
    });
    const [, code] = SERVICE_LINK.exec((await texts(alice)).get('919812345678')!)!;
    assert.equal((await open(`/l/${code}`)).statusCode, 302);
    const deleted = await api.t.app.inject({
      method: 'DELETE',
      url: `/admin/accounts/${alice.account.row.id}`,
      headers: bearer(ADMIN_TOKEN),
    });
    assert.equal(deleted.statusCode, 204);
    assert.equal((await open(`/l/${code}`)).statusCode, 404);
    assert.deepEqual(await api.t.ctx.db.selectFrom('link_clicks').selectAll().execute(), []);
  });

  it('shows no clicks on a send without a landing page', async () => {
    const queueId = await send(alice, '/sms/single', {
      recipient: '919812345678',
      senderName: 'HERALD',
      body: 'no link',
    });
    assert.equal((await texts(alice)).get('919812345678'), 'no link');
    const result = await read(alice, queueId);
    assert.deepEqual([result.clicks, result.recipients[0].clicks], [0, []]);
  });
});
