import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { forEachDatabase } from '../support/databases.ts';
import { ADMIN_TOKEN, bearer, startTestApp, type TestApp } from '../support/app.ts';
import { assertFailure } from '../support/client.ts';

forEachDatabase((dialect) => {
  let t: TestApp;
  beforeEach(async () => {
    t = await startTestApp(dialect, { env: { BODY_LIMIT_BYTES: '2048' } });
  });
  afterEach(() => t.close());

  const post = (payload: string | undefined, contentType?: string) =>
    t.app.inject({
      method: 'POST',
      url: '/token',
      payload,
      headers: contentType ? { 'content-type': contentType } : {},
    });

  it('accepts application/json-patch+json as JSON, as the spec samples send it', async () => {
    const account = await t.createAccount();
    const response = await post(
      JSON.stringify({
        userName: account.userName,
        password: account.password,
        privateToken: account.privateToken,
        validity: 'ShortLive',
      }),
      'application/json-patch+json',
    );
    assert.equal(response.statusCode, 200);
    assert.equal(response.json().expires_in, 30);
  });

  it('answers 415 for any other content type', async () => {
    assertFailure(await post('userName=a', 'application/x-www-form-urlencoded'), 415, /application\/json/);
    assertFailure(await post('hello', 'text/plain'), 415, /application\/json/);
    assertFailure(await post('<a/>', 'application/xml'), 415, /application\/json/);
  });

  it('answers 413 for a body over the limit', async () => {
    assertFailure(await post(JSON.stringify({ userName: 'x'.repeat(4096) }), 'application/json'), 413, /larger/);
  });

  it('answers 400 for unparseable JSON, an empty body, {} and a JSON non-object', async () => {
    assertFailure(await post('{"userName": ', 'application/json'), 400, /not valid JSON/);
    assertFailure(await post('', 'application/json'), 400, /empty/);
    assertFailure(await post(undefined), 400, /empty/);
    assertFailure(await post('{}', 'application/json'), 400, /not valid/);
    assertFailure(await post('[1,2]', 'application/json'), 400, /not valid/);
  });

  it('answers 400 naming the field for a value of the wrong type', async () => {
    const response = await post(
      JSON.stringify({
        userName: 5,
        password: 'x',
        privateToken: '6a2f41a3-c54c-4bd1-8a5a-1c9b1a1c5d6e',
        validity: 'Default',
      }),
      'application/json',
    );
    assertFailure(response, 400, /not valid/);
    assert.deepEqual(response.json().errors, [{ field: 'userName', message: 'must be a string' }]);
  });

  it(
    'answers 404 in the error shape for an unknown route, one ' + 'path segment or several, whatever the method',
    async () => {
      // One segment is also a short link's path on a shortener host (src/links): not on this one.
      for (const [method, url] of [
        ['GET', '/nowhere'],
        ['GET', '/no/where'],
        ['HEAD', '/nowhere'],
        ['POST', '/nowhere'],
        ['GET', '/Ab3dE6gH'],
        ['GET', '/no/where?x=%00'],
      ] as const) {
        const response = await t.app.inject({ method, url });
        assert.equal(response.statusCode, 404, `${method} ${url}`);
        // The path alone: a query is no part of a route, and one holding NUL is not echoed.
        if (method !== 'HEAD')
          assert.deepEqual(response.json(), {
            status: 'Failure',
            message: `No route for ${method} ${url.split('?')[0]}.`,
            errors: [],
          });
      }
    },
  );

  it('keeps the admin API behind ADMIN_TOKEN', async () => {
    assert.equal((await t.app.inject({ method: 'GET', url: '/admin/accounts' })).statusCode, 401);
    assert.equal(
      (await t.app.inject({ method: 'GET', url: '/admin/accounts', headers: bearer('wrong-token-wrong-token') }))
        .statusCode,
      401,
    );
    const account = await t.createAccount();
    const asAccount = await t.app.inject({
      method: 'GET',
      url: '/admin/accounts',
      headers: bearer(await t.tokenFor(account)),
    });
    assert.equal(asAccount.statusCode, 401);
    assert.equal(
      (await t.app.inject({ method: 'GET', url: '/admin/accounts', headers: bearer(ADMIN_TOKEN) })).statusCode,
      200,
    );
  });

  it('serves the OpenAPI document, the docs page, health, readiness and metrics', async () => {
    const openapi = await t.app.inject({ method: 'GET', url: '/openapi.json' });
    assert.equal(openapi.statusCode, 200);
    const document = openapi.json();
    assert.ok(document.paths['/token'].post);
    assert.deepEqual(document.paths['/account'].get.security, [{ bearer: [] }, { apiKey: [] }]);
    assert.deepEqual(document.paths['/account'].get['x-scope'], ['read']);
    assert.deepEqual(document.paths['/landing-pages'].post.security, [{ bearer: [] }, { apiKey: [] }]);
    assert.deepEqual(document.paths['/api-keys'].post.security, [{ bearer: [] }], 'no key manages keys');
    assert.deepEqual(document.paths['/admin/accounts'].get.security, [{ bearer: [] }]);
    assert.equal(document.paths['/l/{code}'].get.security, undefined, 'a short link is opened without a token');
    assert.equal(document.paths['/{code}'], undefined, 'the shortener hosts’ path is no route of the API’s host');
    assert.ok(document.components.schemas.ErrorBody);
    assert.match(document.info.description, /email batches through the sandbox transport or an SMTP relay/);
    assert.ok(document.paths['/sandbox/sms/inbound'].post.responses['409'], 'it says when it is not the sandbox');
    assert.deepEqual(
      Object.keys(document.paths['/sms/single'].post.requestBody.content),
      ['application/json', 'application/json-patch+json'],
      'the spec’s samples send the second',
    );
    assert.ok(document.paths['/sms/single'].post.responses['403'], 'an API key without the scope');
    assert.ok(document.paths['/contacts/batch'].post.responses['403']);

    const docs = await t.app.inject({ method: 'GET', url: '/docs/' });
    assert.equal(docs.statusCode, 200);
    assert.match(docs.body, /swagger/i);

    assert.deepEqual((await t.app.inject({ method: 'GET', url: '/healthz' })).json(), { status: 'ok' });
    assert.deepEqual((await t.app.inject({ method: 'GET', url: '/readyz' })).json(), { status: 'ready' });

    await t.app.inject({ method: 'POST', url: '/token', payload: {} });
    const metrics = await t.app.inject({ method: 'GET', url: '/metrics' });
    assert.match(metrics.headers['content-type'] as string, /^text\/plain/);
    assert.match(metrics.body, /http_requests_total\{method="POST",route="\/token",status_code="400"\} 1/);
    assert.match(metrics.body, /http_request_duration_seconds_bucket\{le="0.005",method="POST",route="\/token"\}/);
  });

  it('reports not ready when the database is gone', async () => {
    await t.database.db.destroy();
    const response = await t.app.inject({ method: 'GET', url: '/readyz' });
    assert.equal(response.statusCode, 503);
  });
});
