import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { forEachDatabase } from '../support/databases.ts';
import { bearer, startTestApp, type TestAccount, type TestApp } from '../support/app.ts';
import { assertFailure } from '../support/client.ts';

/** What outlives a console session, each with what the route answers once it is done. */
/** Each body made with a number, so that two of them differ where a route takes a URL once. */
const asks: Array<[string, 'POST' | 'PATCH', string, (n: number) => object, number]> = [
  ['create an API key', 'POST', '/api-keys', () => ({ name: 'from the console', scopes: ['sms:send'] }), 201],
  [
    'add a webhook endpoint',
    'POST',
    '/webhooks/endpoints',
    (n) => ({ url: `http://127.0.0.1:9/hooks/${n}`, events: ['sms.status'] }),
    201,
  ],
  [
    'set where messages from handsets are posted',
    'PATCH',
    '/account',
    (n) => ({ inboundSmsWebhookUrl: `http://127.0.0.1:9/inbound/${n}` }),
    200,
  ],
];

forEachDatabase((dialect) => {
  let t: TestApp;
  let account: TestAccount;
  let session: { cookie: string; 'x-csrf-token': string };

  beforeEach(async () => {
    t = await startTestApp(dialect, { env: { WEBHOOK_ALLOW_PRIVATE: 'true' } });
    account = await t.createAccount();
    const signIn = await t.app.inject({
      method: 'POST',
      url: '/console/session',
      payload: { userName: account.userName, password: account.password, privateToken: account.privateToken },
    });
    session = {
      cookie: `herald_console=${signIn.cookies.find((c) => c.name === 'herald_console')!.value}`,
      'x-csrf-token': signIn.json().csrfToken,
    };
  });
  afterEach(() => t.close());

  for (const [what, method, url, body, done] of asks) {
    describe(`${method} ${url}`, () => {
      it(`asks the console for the password again to ${what}, and a token never`, async () => {
        const send = (payload: object, headers: Record<string, string>) =>
          t.app.inject({ method, url, headers, payload });
        assertFailure(await send(body(1), session), 400, /password again/);
        assertFailure(await send({ ...body(1), password: 'not it' }, session), 403, /password is incorrect/);
        const asked = await send({ ...body(1), password: account.password }, session);
        assert.equal(asked.statusCode, done, asked.body);
        const byToken = await send(body(2), bearer(await t.tokenFor(account)));
        assert.equal(byToken.statusCode, done, byToken.body);
      });
    });
  }

  it('takes a console’s settings without the password when no URL is set, and refuses a password alone', async () => {
    const patch = (payload: object) => t.app.inject({ method: 'PATCH', url: '/account', headers: session, payload });
    const settings = await patch({ locale: 'en-IN', inboundSmsWebhookUrl: null });
    assert.equal(settings.statusCode, 200, settings.body);
    assertFailure(await patch({ password: account.password }), 400, /not valid/);
  });
});
