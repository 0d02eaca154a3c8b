import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { forEachDatabase } from '../support/databases.ts';
import { ADMIN_TOKEN, bearer, errorFields } from '../support/app.ts';
import { startApiTest, type ApiClient, type ApiTest } from '../support/client.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

forEachDatabase((dialect) => {
  let api: ApiTest;
  let alice: ApiClient;
  beforeEach(async () => {
    api = await startApiTest(dialect);
    alice = await api.client();
  });
  afterEach(() => api.close());

  const admin = (method: 'GET' | 'POST', url: string, payload?: object, token = ADMIN_TOKEN) =>
    api.t.app.inject({ method, url, headers: bearer(token), ...(payload ? { payload } : {}) });

  it(
    'creates a landing page (201, exactly {landingPageId, name, url}) and lists the account’s own, a page at a ' +
      'time',
    async () => {
      const bob = await api.client();
      const created = await alice.post('/landing-pages', {
        name: ' Spring sale ',
        url: 'https://Shop.Example.com/spring sale?src=sms',
      });
      assert.equal(created.statusCode, 201, created.body);
      const page = created.json();
      assert.deepEqual(Object.keys(page).sort(), ['landingPageId', 'name', 'url']);
      assert.match(page.landingPageId, UUID);
      assert.deepEqual([page.name, page.url], ['Spring sale', 'https://shop.example.com/spring%20sale?src=sms']);
      api.clock.advance(1);
      const second = (await alice.post('/landing-pages', { name: 'Winter', url: 'http://example.com' })).json();
      await bob.post('/landing-pages', { name: 'Bob’s', url: 'https://bob.example' });

      const first = (await alice.get('/landing-pages?limit=1')).json();
      assert.deepEqual(first.landingPages, [page]);
      assert.equal(typeof first.nextCursor, 'string');
      const rest = (await alice.get(`/landing-pages?limit=1&cursor=${first.nextCursor}`)).json();
      assert.deepEqual(rest, {
        landingPages: [{ landingPageId: second.landingPageId, name: 'Winter', url: 'http://example.com/' }],
        nextCursor: null,
      });
      assert.deepEqual(
        (await bob.get('/landing-pages')).json().landingPages.map((p: { name: string }) => p.name),
        ['Bob’s'],
      );
      assert.equal((await alice.get('/landing-pages?cursor=nonsense')).statusCode, 400);
    },
  );

  it(
    'refuses a landing page without a name of 1 to 100 characters or an absolute http(s) URL, with 400 naming the ' +
      'field',
    async () => {
      const refused: Array<[object, string]> = [
        [{ name: ' ', url: 'https://example.com' }, 'name'],
        [{ name: 'x'.repeat(101), url: 'https://example.com' }, 'name'],
        [{ name: 'Sale', url: '/relative/path' }, 'url'],
        [{ name: 'Sale', url: 'javascript:alert(1)' }, 'url'],
        [{ name: 'Sale', url: 'ftp://example.com/file' }, 'url'],
        [{ name: 'Sale', url: 'https://bank.example@evil.example/' }, 'url'],
        [{ name: 'Sale' }, 'url'],
        [{ name: 'Sale', url: 'https://example.com', landingPageUrl: 'x' }, 'landingPageUrl'],
      ];
      for (const [body, field] of refused) {
        const response = await alice.post('/landing-pages', body);
        assert.equal(response.statusCode, 400, JSON.stringify(body));
        assert.deepEqual(errorFields(response), [field], JSON.stringify(body));
      }
      assert.deepEqual((await alice.get('/landing-pages')).json().landingPages, []);
    },
  );

  it('answers 409 for a name the account already has (case-insensitively), not for another account’s', async () => {
    const bob = await api.client();
    assert.equal((await alice.post('/landing-pages', { name: 'Sale', url: 'https://example.com' })).statusCode, 201);
    const again = await alice.post('/landing-pages', { name: 'SALE', url: 'https://example.org' });
    assert.equal(again.statusCode, 409);
    assert.deepEqual(errorFields(again), ['name']);
    assert.equal((await bob.post('/landing-pages', { name: 'Sale', url: 'https://example.com' })).statusCode, 201);
  });

  it('creates a landing page posted again with its Idempotency-Key once', async () => {
    const post = () =>
      api.t.app.inject({
        method: 'POST',
        url: '/landing-pages',
        headers: { ...bearer(alice.token), 'idempotency-key': 'page-1' },
        payload: { name: 'Sale', url: 'https://example.com' },
      });
    const [first, again] = [await post(), await post()];
    assert.equal(again.statusCode, 201);
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.deepEqual(again.json(), first.json());
    assert.equal((await alice.get('/landing-pages')).json().landingPages.length, 1);
  });

  it('needs a token for landing pages', async () => {
    assert.equal((await api.t.app.inject({ method: 'GET', url: '/landing-pages' })).statusCode, 401);
    assert.equal(
      (
        await api.t.app.inject({
          method: 'POST',
          url: '/landing-pages',
          payload: { name: 'x', url: 'https://example.com' },
        })
      ).statusCode,
      401,
    );
  });

  it(
    'registers shortener domains under ADMIN_TOKEN: one ' + 'account per domain, never the service’s own host',
    async () => {
      const bob = await api.client();
      const path = `/admin/accounts/${alice.account.row.id}/shortener-domains`;
      const created = await admin('POST', path, { domain: ' Go.Example.com ' });
      assert.equal(created.statusCode, 201, created.body);
      assert.deepEqual(Object.keys(created.json()).sort(), ['createdAt', 'domain']);
      assert.equal(created.json().domain, 'go.example.com');
      assert.deepEqual(
        (await admin('POST', path, { domain: 'go.example.com' })).json(),
        created.json(),
        'registering it again changes nothing',
      );
      assert.equal((await admin('POST', path, { domain: 'b.example.com' })).statusCode, 201);
      assert.deepEqual((await admin('GET', path)).json(), { shortenerDomains: ['b.example.com', 'go.example.com'] });

      const taken = await admin('POST', `/admin/accounts/${bob.account.row.id}/shortener-domains`, {
        domain: 'GO.example.com',
      });
      assert.equal(taken.statusCode, 409);
      assert.deepEqual(errorFields(taken), ['domain']);
      assert.deepEqual((await admin('GET', `/admin/accounts/${bob.account.row.id}/shortener-domains`)).json(), {
        shortenerDomains: [],
      });

      for (const domain of ['not a domain', 'localhost', 'https://go.example.com']) {
        const response = await admin('POST', path, { domain });
        assert.equal(response.statusCode, 400, domain);
        assert.deepEqual(errorFields(response), ['domain']);
      }
      assert.equal(
        (
          await admin('POST', '/admin/accounts/0b6c1c1e-8f4e-4c49-9a51-3f3d2c1b0a99/shortener-domains', {
            domain: 'x.example.com',
          })
        ).statusCode,
        404,
      );
      assert.equal((await admin('POST', path, { domain: 'x.example.com' }, alice.token)).statusCode, 401);
      assert.equal((await admin('GET', path, undefined, alice.token)).statusCode, 401);
    },
  );

  it(
    'answers 404 in the error shape for a short link that is not ' + 'one, and for /<code> on the service’s own host',
    async () => {
      for (const url of ['/l/Abc12345', '/l/abc', '/l/too-long-and-dashed', '/l/%C3%A9']) {
        const response = await api.t.app.inject({ method: 'GET', url });
        assert.equal(response.statusCode, 404, url);
        assert.deepEqual(
          [response.json().status, response.json().message],
          ['Failure', 'The link was not found.'],
          url,
        );
      }
      for (const url of ['/Abc12345', '/nowhere', '/%00']) {
        const response = await api.t.app.inject({ method: 'GET', url });
        assert.equal(response.statusCode, 404, url);
        assert.deepEqual(response.json(), { status: 'Failure', message: `No route for GET ${url}.`, errors: [] }, url);
      }
      // A host nobody registered is not a shortener host either.
      const elsewhere = await api.t.app.inject({
        method: 'GET',
        url: '/Abc12345',
        headers: { host: 'unknown.example.com' },
      });
      assert.deepEqual([elsewhere.statusCode, elsewhere.json().message], [404, 'No route for GET /Abc12345.']);
    },
  );
});
