import assert from 'node:assert/strict';
import { afterEach, it } from 'node:test';
import { forEachDatabase } from '../support/databases.ts';
import { ADMIN_TOKEN, bearer } from '../support/app.ts';
import { startApiTest, type ApiClient, type ApiTest } from '../support/client.ts';
import { dkimpyVerdict, mailauthVerdict } from './dkim-verifiers.ts';
import { buildBatch, sandboxEmails, sendBatch } from './support.ts';

const SIGNED = [
  'from',
  'to',
  'subject',
  'date',
  'message-id',
  'mime-version',
  'content-type',
  'list-unsubscribe',
  'list-unsubscribe-post',
  'reply-to',
];

forEachDatabase((dialect) => {
  let api: ApiTest;
  afterEach(() => api.close());

  const admin = async (method: 'GET' | 'POST', url: string, payload?: object) => {
    const response = await api.t.app.inject({ method, url, headers: bearer(ADMIN_TOKEN), payload });
    assert.ok(response.statusCode === 200 || response.statusCode === 201, response.body);
    return response.json();
  };
  const onlyEmail = async (client: ApiClient, to: string) => {
    const [message] = await sandboxEmails(client, to);
    assert.ok(message, `a message to ${to}`);
    return message.raw;
  };

  it(
    "signs every message of a batch with the service domain's key: mailauth and dkimpy verify it with the " +
      'published record, List-Unsubscribe and List-Unsubscribe-Post among the signed headers',
    async () => {
      api = await startApiTest(dialect);
      const alice = await api.client();
      await sendBatch(
        api,
        alice,
        buildBatch(
          { replyTo: { email: 'help@mail.localhost', displayName: 'Help' } },
          { recipients: [{ to: 'ada@example.com' }, { to: 'bob@example.com' }] },
        ),
      );
      const { domain, dkim } = await admin('GET', '/admin/dkim');
      assert.equal(domain, 'mail.localhost');
      for (const to of ['ada@example.com', 'bob@example.com']) {
        const raw = await onlyEmail(alice, to);
        assert.match(raw, /^DKIM-Signature: /, 'the signature heads the message');
        const verdict = await mailauthVerdict(raw, dkim);
        assert.equal(verdict.status, 'pass');
        assert.equal(verdict.domain, 'mail.localhost');
        assert.equal(verdict.selector, dkim.selector);
        for (const header of SIGNED)
          assert.ok(
            verdict.signedHeaders.includes(header),
            `${header} is signed (h=${verdict.signedHeaders.join(':')})`,
          );
        assert.equal(await dkimpyVerdict(raw, dkim), 'pass');
      }
    },
  );

  it(
    'a long List-Unsubscribe, folded over lines, still verifies (nodemailer once folded it so that signatures ' +
      'broke)',
    async () => {
      const host = `${'herald-tracking-'.repeat(3)}links.example.com`;
      const publicUrl = `https://${host}/${'a-long-path-prefix/'.repeat(6)}mail`;
      api = await startApiTest(dialect, { env: { PUBLIC_URL: publicUrl } });
      const alice = await api.client();
      await sendBatch(api, alice, buildBatch());
      const raw = await onlyEmail(alice, 'ada@example.com');
      const listUnsubscribe = /^List-Unsubscribe:(.*(?:\r\n[ \t].*)*)/m.exec(raw)![1];
      assert.ok(listUnsubscribe.replace(/\r\n[ \t]+/g, ' ').includes(`<${publicUrl}/t/u/`), listUnsubscribe);
      assert.match(listUnsubscribe, /\r\n[ \t]/, 'folded over lines');
      const { dkim } = await admin('GET', '/admin/dkim');
      assert.equal((await mailauthVerdict(raw, dkim)).status, 'pass');
      assert.equal(await dkimpyVerdict(raw, dkim), 'pass');
    },
  );

  it(
    "signs a message from an account's own sender domain with that domain's key, and one from the service domain " +
      "with the service's",
    async () => {
      api = await startApiTest(dialect);
      const alice = await api.client();
      const bob = await api.client();
      const own = await admin('POST', `/admin/accounts/${alice.account.row.id}/sender-domains`, {
        domain: 'shop.example',
      });
      // Another account authorised for the same domain holds a key of its own, which never signs Alice's mail.
      const bobs = await admin('POST', `/admin/accounts/${bob.account.row.id}/sender-domains`, {
        domain: 'shop.example',
      });
      assert.notEqual(bobs.dkim.selector, own.dkim.selector);
      await sendBatch(
        api,
        alice,
        buildBatch(
          { senderFrom: { email: 'news@shop.example', displayName: 'Shop' } },
          { recipients: [{ to: 'ada@example.com' }] },
        ),
      );
      await sendBatch(api, alice, buildBatch({}, { recipients: [{ to: 'bob@example.com' }] }));

      const fromShop = await onlyEmail(alice, 'ada@example.com');
      const verdict = await mailauthVerdict(fromShop, own.dkim);
      assert.deepEqual([verdict.status, verdict.domain, verdict.selector], ['pass', 'shop.example', own.dkim.selector]);
      assert.equal(await dkimpyVerdict(fromShop, own.dkim), 'pass');
      assert.equal(
        (await mailauthVerdict(fromShop, { ...bobs.dkim, recordName: own.dkim.recordName })).status,
        'fail',
        "Bob's key does not verify Alice's mail",
      );

      const fromService = await onlyEmail(alice, 'bob@example.com');
      const { dkim: service } = await admin('GET', '/admin/dkim');
      const serviceVerdict = await mailauthVerdict(fromService, service);
      assert.deepEqual(
        [serviceVerdict.status, serviceVerdict.domain, serviceVerdict.selector],
        ['pass', 'mail.localhost', service.selector],
      );
    },
  );

  it(
    'after a rotation, new messages carry the new selector and verify with the new record; earlier ones still ' +
      'verify with the retired one',
    async () => {
      api = await startApiTest(dialect);
      const alice = await api.client();
      const accountId = alice.account.row.id;
      const first = await admin('POST', `/admin/accounts/${accountId}/sender-domains`, { domain: 'shop.example' });
      const from = { senderFrom: { email: 'news@shop.example', displayName: 'Shop' } };
      await sendBatch(api, alice, buildBatch(from, { recipients: [{ to: 'before@example.com' }] }));
      const rotated = await admin('POST', `/admin/accounts/${accountId}/sender-domains/shop.example/dkim-rotations`);
      assert.notEqual(rotated.dkim.selector, first.dkim.selector);
      await sendBatch(api, alice, buildBatch(from, { recipients: [{ to: 'after@example.com' }] }));

      const after = await onlyEmail(alice, 'after@example.com');
      const verdict = await mailauthVerdict(after, rotated.dkim);
      assert.deepEqual([verdict.status, verdict.selector], ['pass', rotated.dkim.selector]);
      assert.equal(await dkimpyVerdict(after, rotated.dkim), 'pass');
      const before = await onlyEmail(alice, 'before@example.com');
      assert.equal((await mailauthVerdict(before, first.dkim)).status, 'pass');

      const service = await admin('GET', '/admin/dkim');
      const serviceRotated = await admin('POST', '/admin/dkim/rotations');
      assert.notEqual(serviceRotated.dkim.selector, service.dkim.selector);
      await sendBatch(api, alice, buildBatch({}, { recipients: [{ to: 'service@example.com' }] }));
      const fromService = await onlyEmail(alice, 'service@example.com');
      assert.equal((await mailauthVerdict(fromService, serviceRotated.dkim)).selector, serviceRotated.dkim.selector);
      assert.equal(await dkimpyVerdict(fromService, serviceRotated.dkim), 'pass');
    },
  );

  it('a message altered after signing fails verification: its body, or a signed header', async () => {
    api = await startApiTest(dialect);
    const alice = await api.client();
    await sendBatch(api, alice, buildBatch());
    const raw = await onlyEmail(alice, 'ada@example.com');
    const { dkim } = await admin('GET', '/admin/dkim');
    assert.equal((await mailauthVerdict(raw, dkim)).status, 'pass', 'unaltered, it passes');
    const body = raw.replace('welcome.', 'welcome!');
    assert.notEqual(body, raw);
    assert.equal((await mailauthVerdict(body, dkim)).status, 'fail');
    assert.equal(await dkimpyVerdict(body, dkim), 'fail');
    const header = raw.replace(/^List-Unsubscribe-Post: .*$/m, 'List-Unsubscribe-Post: List-Unsubscribe=Never');
    assert.notEqual(header, raw);
    assert.equal((await mailauthVerdict(header, dkim)).status, 'fail');
    assert.equal(await dkimpyVerdict(header, dkim), 'fail');
  });
});
