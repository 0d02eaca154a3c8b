import assert from 'node:assert/strict';
import { createPublicKey } from 'node:crypto';
import { afterEach, beforeEach, it } from 'node:test';
import { forEachDatabase } from '../support/databases.ts';
import { ADMIN_TOKEN, bearer, errorFields, startTestApp, type TestApp } from '../support/app.ts';

const SELECTOR = /^herald-20261122-[0-9a-f]{6}$/;

/** The record's p= is a base64 DER SubjectPublicKeyInfo of a 2048-bit RSA key. */
function assertRecordValue(recordValue: string): void {
  const match = /^v=DKIM1; k=rsa; p=([A-Za-z0-9+/]+={0,2})$/.exec(recordValue);
  assert.ok(match, recordValue);
  const key = createPublicKey({ key: Buffer.from(match[1], 'base64'), format: 'der', type: 'spki' });
  assert.equal(key.asymmetricKeyType, 'rsa');
  assert.equal(key.asymmetricKeyDetails?.modulusLength, 2048);
}

forEachDatabase((dialect) => {
  let t: TestApp;
  beforeEach(async () => {
    t = await startTestApp(dialect);
  });
  afterEach(() => t.close());

  const admin = (method: 'GET' | 'POST' | 'DELETE', url: string, payload?: object, token = ADMIN_TOKEN) =>
    t.app.inject({ method, url, headers: bearer(token), payload });
  const newAccount = async () => (await t.createAccount()).row.id;

  it(
    "answers a new sender domain's DKIM record in exactly ARCHITECTURE.md's shape, lists it, and answers the same " +
      'record when the domain is added again',
    async () => {
      const accountId = await newAccount();
      const added = await admin('POST', `/admin/accounts/${accountId}/sender-domains`, {
        domain: ' Shop.Example.com ',
      });
      assert.equal(added.statusCode, 201, added.body);
      const body = added.json();
      assert.deepEqual(Object.keys(body).sort(), ['dkim', 'domain']);
      assert.deepEqual(Object.keys(body.dkim).sort(), ['recordName', 'recordValue', 'selector']);
      assert.equal(body.domain, 'shop.example.com');
      assert.match(body.dkim.selector, SELECTOR);
      assert.equal(body.dkim.recordName, `${body.dkim.selector}._domainkey.shop.example.com`);
      assertRecordValue(body.dkim.recordValue);

      assert.deepEqual(
        (await admin('POST', `/admin/accounts/${accountId}/sender-domains`, { domain: 'shop.example.com' })).json(),
        body,
        'the same key, not a new one',
      );
      await admin('POST', `/admin/accounts/${accountId}/sender-domains`, { domain: 'news.example.org' });
      const listed = (await admin('GET', `/admin/accounts/${accountId}/sender-domains`)).json();
      assert.deepEqual(Object.keys(listed), ['senderDomains']);
      assert.deepEqual(
        listed.senderDomains.map((d: { domain: string }) => d.domain),
        ['news.example.org', 'shop.example.com'],
      );
      assert.deepEqual(listed.senderDomains[1], body);
    },
  );

  it("answers the service domain's record on GET /admin/dkim, its key made on first need and kept", async () => {
    const first = await admin('GET', '/admin/dkim');
    assert.equal(first.statusCode, 200, first.body);
    const body = first.json();
    assert.deepEqual(Object.keys(body).sort(), ['dkim', 'domain']);
    assert.equal(body.domain, 'mail.localhost');
    assert.match(body.dkim.selector, SELECTOR);
    assert.equal(body.dkim.recordName, `${body.dkim.selector}._domainkey.mail.localhost`);
    assertRecordValue(body.dkim.recordValue);
    assert.deepEqual((await admin('GET', '/admin/dkim')).json(), body);
  });

  it(
    "rotates a sender domain's key under a new selector, keeps the old one listed as retired until removed, and " +
      'never removes the active one',
    async () => {
      const accountId = await newAccount();
      const old = (
        await admin('POST', `/admin/accounts/${accountId}/sender-domains`, { domain: 'shop.example' })
      ).json();
      t.clock.advance(60_000);
      const rotated = await admin('POST', `/admin/accounts/${accountId}/sender-domains/Shop.Example/dkim-rotations`);
      assert.equal(rotated.statusCode, 201, rotated.body);
      const fresh = rotated.json();
      assert.deepEqual(Object.keys(fresh).sort(), ['dkim', 'domain']);
      assert.equal(fresh.domain, 'shop.example');
      assert.match(fresh.dkim.selector, SELECTOR);
      assert.notEqual(fresh.dkim.selector, old.dkim.selector);
      assert.notEqual(fresh.dkim.recordValue, old.dkim.recordValue);
      assert.deepEqual(
        (await admin('GET', `/admin/accounts/${accountId}/sender-domains`)).json().senderDomains,
        [fresh],
        'the list shows the key that signs',
      );

      const keysUrl = `/admin/accounts/${accountId}/sender-domains/shop.example/dkim-keys`;
      const keys = (await admin('GET', keysUrl)).json();
      assert.equal(keys.domain, 'shop.example');
      assert.deepEqual(keys.keys, [
        { ...fresh.dkim, active: true, createdAt: '2026-11-22T12:01:00.000Z', retiredAt: null },
        { ...old.dkim, active: false, createdAt: '2026-11-22T12:00:00.000Z', retiredAt: '2026-11-22T12:01:00.000Z' },
      ]);

      const active = await admin('DELETE', `${keysUrl}/${fresh.dkim.selector}`);
      assert.equal(active.statusCode, 409, active.body);
      assert.equal((await admin('DELETE', `${keysUrl}/${old.dkim.selector}`)).statusCode, 204);
      assert.deepEqual(
        (await admin('GET', keysUrl)).json().keys.map((k: { selector: string }) => k.selector),
        [fresh.dkim.selector],
      );
      assert.equal((await admin('DELETE', `${keysUrl}/${old.dkim.selector}`)).statusCode, 404);
    },
  );

  it("rotates the service domain's key the same way", async () => {
    const old = (await admin('GET', '/admin/dkim')).json();
    const rotated = await admin('POST', '/admin/dkim/rotations');
    assert.equal(rotated.statusCode, 201, rotated.body);
    const fresh = rotated.json();
    assert.equal(fresh.domain, 'mail.localhost');
    assert.notEqual(fresh.dkim.selector, old.dkim.selector);
    assert.deepEqual((await admin('GET', '/admin/dkim')).json(), fresh);
    const keys = (await admin('GET', '/admin/dkim/keys')).json();
    assert.deepEqual(
      keys.keys.map((k: { selector: string; active: boolean }) => [k.selector, k.active]),
      [
        [fresh.dkim.selector, true],
        [old.dkim.selector, false],
      ],
    );
    assert.equal((await admin('DELETE', `/admin/dkim/keys/${fresh.dkim.selector}`)).statusCode, 409);
    assert.equal((await admin('DELETE', `/admin/dkim/keys/${old.dkim.selector}`)).statusCode, 204);
    assert.equal((await admin('GET', '/admin/dkim/keys')).json().keys.length, 1);
  });

  it(
    "keeps each account's key of a domain its own: another " + "account's rotation or removal does not touch it",
    async () => {
      const alice = await newAccount();
      const bob = await newAccount();
      const alices = (
        await admin('POST', `/admin/accounts/${alice}/sender-domains`, { domain: 'shared.example' })
      ).json();
      const bobs = (await admin('POST', `/admin/accounts/${bob}/sender-domains`, { domain: 'shared.example' })).json();
      assert.notEqual(bobs.dkim.selector, alices.dkim.selector);
      await admin('POST', `/admin/accounts/${bob}/sender-domains/shared.example/dkim-rotations`);
      assert.deepEqual((await admin('GET', `/admin/accounts/${alice}/sender-domains`)).json().senderDomains, [alices]);
      const foreign = await admin(
        'DELETE',
        `/admin/accounts/${alice}/sender-domains/shared.example/dkim-keys/${bobs.dkim.selector}`,
      );
      assert.equal(foreign.statusCode, 404, "Bob's retired key is not Alice's to remove");
      assert.equal(
        (await admin('GET', `/admin/accounts/${bob}/sender-domains/shared.example/dkim-keys`)).json().keys.length,
        2,
      );
      assert.equal(
        (await admin('GET', `/admin/accounts/${alice}/sender-domains/shared.example/dkim-keys`)).json().keys.length,
        1,
      );
    },
  );

  it('keeps the private keys sealed at rest: no PEM, no key material in clear', async () => {
    const accountId = await newAccount();
    await admin('POST', `/admin/accounts/${accountId}/sender-domains`, { domain: 'shop.example' });
    await admin('GET', '/admin/dkim');
    const rows = await t.database.db.selectFrom('dkim_keys').selectAll().execute();
    assert.equal(rows.length, 2);
    for (const row of rows) {
      assert.match(row.private_key, /^v1:[A-Za-z0-9_-]+$/, 'sealed (sealed.ts)');
      assert.doesNotMatch(row.private_key, /PRIVATE KEY|BEGIN/);
      assert.doesNotMatch(Buffer.from(row.private_key.slice(3), 'base64url').toString('latin1'), /PRIVATE KEY/);
      assert.equal(row.retired_at, null);
    }
  });

  it(
    'refuses a bad domain or the service domain with 400, an unknown account or a domain it does not hold with ' +
      '404, and everything without the admin token with 401',
    async () => {
      const accountId = await newAccount();
      for (const domain of ['not a domain', 'exa mple.com', '-bad.example', 'localhost', 'a\u0000.example']) {
        const response = await admin('POST', `/admin/accounts/${accountId}/sender-domains`, { domain });
        assert.equal(response.statusCode, 400, `${JSON.stringify(domain)}: ${response.body}`);
        assert.deepEqual(errorFields(response), ['domain']);
      }
      const service = await admin('POST', `/admin/accounts/${accountId}/sender-domains`, { domain: 'Mail.Localhost' });
      assert.equal(service.statusCode, 400);
      assert.deepEqual(errorFields(service), ['domain']);
      assert.deepEqual(
        (await admin('GET', `/admin/accounts/${accountId}/sender-domains`)).json(),
        { senderDomains: [] },
        'nothing written',
      );
      assert.equal((await t.database.db.selectFrom('dkim_keys').select('domain').execute()).length, 0);

      const unknown = '00000000-0000-4000-8000-000000000000';
      assert.equal(
        (await admin('POST', `/admin/accounts/${unknown}/sender-domains`, { domain: 'shop.example' })).statusCode,
        404,
      );
      assert.equal(
        (await admin('POST', `/admin/accounts/${unknown}/sender-domains/shop.example/dkim-rotations`)).statusCode,
        404,
      );
      assert.equal(
        (await admin('GET', `/admin/accounts/${unknown}/sender-domains/shop.example/dkim-keys`)).statusCode,
        404,
      );
      assert.equal(
        (await admin('POST', `/admin/accounts/${accountId}/sender-domains/shop.example/dkim-rotations`)).statusCode,
        404,
        'a domain the account does not hold',
      );
      assert.equal(
        (await admin('GET', `/admin/accounts/${accountId}/sender-domains/shop.example/dkim-keys`)).statusCode,
        404,
      );
      assert.equal(
        (
          await admin(
            'DELETE',
            `/admin/accounts/${accountId}/sender-domains/shop.example/dkim-keys/herald-20261122-abcdef`,
          )
        ).statusCode,
        404,
      );
      assert.equal((await admin('DELETE', '/admin/dkim/keys/herald-20261122-abcdef')).statusCode, 404);
      assert.equal(
        (await t.database.db.selectFrom('dkim_keys').select('domain').execute()).length,
        0,
        'a refused rotation makes no key',
      );
      for (const domain of ['shop%00.example', 'shop%20example']) {
        assert.equal(
          (await admin('POST', `/admin/accounts/${accountId}/sender-domains/${domain}/dkim-rotations`)).statusCode,
          400,
          `${domain}: not a domain name`,
        );
      }
      for (const selector of ['herald%00', 'her.ald', 'x'.repeat(64)]) {
        assert.equal((await admin('DELETE', `/admin/dkim/keys/${selector}`)).statusCode, 400, `selector ${selector}`);
      }

      const routes: Array<['GET' | 'POST' | 'DELETE', string]> = [
        ['POST', `/admin/accounts/${accountId}/sender-domains`],
        ['GET', `/admin/accounts/${accountId}/sender-domains`],
        ['POST', `/admin/accounts/${accountId}/sender-domains/shop.example/dkim-rotations`],
        ['GET', `/admin/accounts/${accountId}/sender-domains/shop.example/dkim-keys`],
        ['DELETE', `/admin/accounts/${accountId}/sender-domains/shop.example/dkim-keys/herald-20261122-abcdef`],
        ['GET', '/admin/dkim'],
        ['POST', '/admin/dkim/rotations'],
        ['GET', '/admin/dkim/keys'],
        ['DELETE', '/admin/dkim/keys/herald-20261122-abcdef'],
      ];
      const accountToken = await t.tokenFor(await t.createAccount());
      for (const [method, url] of routes) {
        for (const token of ['not-the-admin-token-at-all', accountToken]) {
          const response = await admin(method, url, method === 'POST' ? { domain: 'shop.example' } : undefined, token);
          assert.equal(response.statusCode, 401, `${method} ${url}`);
        }
        const bare = await t.app.inject({ method, url });
        assert.equal(bare.statusCode, 401, `${method} ${url} without a token`);
      }
    },
  );

  it('documents the DKIM routes and their answers in the OpenAPI document (/docs)', async () => {
    const { paths } = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json();
    const added =
      paths['/admin/accounts/{accountId}/sender-domains'].post.responses['201'].content['application/json'].schema;
    assert.deepEqual(Object.keys(added.properties).sort(), ['dkim', 'domain']);
    assert.deepEqual(Object.keys(added.properties.dkim.properties).sort(), ['recordName', 'recordValue', 'selector']);
    const listed =
      paths['/admin/accounts/{accountId}/sender-domains'].get.responses['200'].content['application/json'].schema;
    assert.deepEqual(listed.properties.senderDomains.items, added);
    for (const path of [
      '/admin/dkim',
      '/admin/dkim/rotations',
      '/admin/dkim/keys',
      '/admin/dkim/keys/{selector}',
      '/admin/accounts/{accountId}/sender-domains/{domain}/dkim-rotations',
      '/admin/accounts/{accountId}/sender-domains/{domain}/dkim-keys',
      '/admin/accounts/{accountId}/sender-domains/{domain}/dkim-keys/{selector}',
    ]) {
      assert.ok(paths[path], path);
    }
  });
});
