import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { forEachDatabase } from '../support/databases.ts';
import { ADMIN_TOKEN, bearer, startTestApp, type TestApp } from '../support/app.ts';

/** The checks every route gets at the HTTP boundary (src/http/boundary.ts), on both databases. */
forEachDatabase((dialect) => {
  let t: TestApp;
  let auth: Record<string, string>;
  beforeEach(async () => {
    t = await startTestApp(dialect);
    auth = bearer(await t.tokenFor(await t.createAccount()));
  });
  afterEach(() => t.close());

  const send = (
    method: 'GET' | 'POST' | 'DELETE' | 'PUT',
    url: string,
    payload?: string | Buffer,
    headers: Record<string, string> = {},
  ) =>
    t.app.inject({
      method,
      url,
      headers: { ...auth, ...(payload === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      payload,
    });
  const postJson = (url: string, body: unknown) => send('POST', url, JSON.stringify(body));

  const refused = (
    response: LightMyRequestResponse,
    status: number,
    errors: Array<{ field: string; message: RegExp }>,
    message?: RegExp,
  ) => {
    assert.equal(response.statusCode, status, response.body);
    const body = response.json();
    assert.equal(body.status, 'Failure');
    if (message) assert.match(body.message, message);
    assert.equal(body.errors.length, errors.length, response.body);
    for (const [i, expected] of errors.entries()) {
      assert.equal(body.errors[i].field, expected.field, response.body);
      assert.match(body.errors[i].message, expected.message, response.body);
    }
  };

  describe('control characters', () => {
    it('refuses NUL in a list name and a property name with 400, where PostgreSQL answered 500', async () => {
      refused(await postJson('/lists', { name: '\u0000' }), 400, [{ field: 'name', message: /NUL \(U\+0000\)/ }]);
      refused(await postJson('/contacts/properties', { propertyname: 'a\u0000b' }), 400, [
        { field: 'propertyname', message: /NUL/ },
      ]);
    });

    it('refuses NUL in a contact of a batch by its path, so no job is queued that cannot run', async () => {
      const response = await postJson('/contacts/batch', {
        createUpdateContacts: [
          { email: 'ok@example.com' },
          { email: 'ok2@example.com' },
          { email: 'nul\u0000@example.com' },
        ],
      });
      refused(response, 400, [{ field: 'createUpdateContacts[2].email', message: /NUL/ }]);
      const jobs = await t.ctx.db.selectFrom('jobs').select('id').execute();
      assert.deepEqual(jobs, []);
    });

    it('refuses tabs and line breaks in one-line fields, and takes them in a property value', async () => {
      refused(await postJson('/lists', { name: 'a\tb' }), 400, [
        { field: 'name', message: /control character U\+0009; this field is one line of text/ },
      ]);
      refused(await postJson('/lists', { name: 'a\nb' }), 400, [{ field: 'name', message: /U\+000A/ }]);
      assert.equal((await postJson('/contacts/properties', { propertyname: 'note' })).statusCode, 201);
      const multiline = await postJson('/contacts/batch', {
        createUpdateContacts: [
          { email: 'ok@example.com', propertyfields: [{ propertyname: 'note', propertyvalue: 'line 1\r\n\tline 2' }] },
        ],
      });
      assert.equal(multiline.statusCode, 202, multiline.body);
      const bell = await postJson('/contacts/batch', {
        createUpdateContacts: [
          { email: 'ok@example.com', propertyfields: [{ propertyname: 'note', propertyvalue: 'ding\u0007' }] },
        ],
      });
      refused(bell, 400, [
        {
          field: 'createUpdateContacts[0].propertyfields[0].propertyvalue',
          message: /U\+0007; only tab, line feed and carriage return/,
        },
      ]);
    });

    it('refuses control characters in a query string and a path parameter', async () => {
      refused(await send('GET', '/contacts?email=a%00b%40example.com'), 400, [{ field: 'email', message: /NUL/ }]);
      refused(await send('GET', '/contacts/batch/%00'), 400, [{ field: 'batchId', message: /NUL/ }]);
      refused(await send('GET', '/contacts?email=a%1bb%40example.com'), 400, [{ field: 'email', message: /U\+001B/ }]);
    });

    it('refuses half of a surrogate pair, and a field name with a control character', async () => {
      refused(await send('POST', '/lists', '{"name":"\\ud800x"}'), 400, [
        { field: 'name', message: /well-formed Unicode/ },
      ]);
      refused(await send('POST', '/lists', '{"name":"x","a\\u0000":1}'), 400, [
        { field: 'a\u0000', message: /^is not a field name: a name must not contain NUL/ },
      ]);
    });
  });

  describe('bodies that are not what they claim', () => {
    it('refuses bytes that are not UTF-8 instead of storing U+FFFD', async () => {
      const body = Buffer.concat([
        Buffer.from('{"createUpdateContacts":[{"email":"'),
        Buffer.from([0xff, 0xfe]),
        Buffer.from('@x.co"}]}'),
      ]);
      refused(await send('POST', '/contacts/batch', body), 400, [], /not valid UTF-8/);
    });

    it('refuses an email address outside ASCII, and takes an internationalised domain in its xn-- form', async () => {
      const batch = (email: string) => postJson('/contacts/batch', { createUpdateContacts: [{ email }] });
      refused(await batch('user@bücher.example'), 400, [
        { field: 'createUpdateContacts[0].email', message: /xn-- form/ },
      ]);
      assert.equal((await batch('user@xn--bcher-kva.example')).statusCode, 202);
    });

    it('says what is refused in a __proto__ or constructor key, and where', async () => {
      refused(await send('POST', '/lists', '{"name":"x","__proto__":{"admin":true}}'), 400, [
        { field: '__proto__', message: /prototype/ },
      ]);
      const nested = '{"createUpdateContacts":[{"email":"a@example.com","constructor":{"prototype":{"x":1}}}]}';
      refused(await send('POST', '/contacts/batch', nested), 400, [
        { field: 'createUpdateContacts[0].constructor', message: /prototype/ },
        { field: 'createUpdateContacts[0].constructor.prototype', message: /prototype/ },
      ]);
    });

    it('refuses nesting deeper than any request needs', async () => {
      const deep = `{"name":${'['.repeat(5000)}${']'.repeat(5000)}}`;
      refused(await send('POST', '/lists', deep), 400, [
        { field: `name${'[0]'.repeat(31)}`, message: /deeper than 32 levels/ },
      ]);
    });

    it('lets a DELETE with a JSON content type and no body go on to its answer', async () => {
      const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
      const missing = await send('DELETE', '/admin/accounts/00000000-0000-4000-8000-000000000000', undefined, {
        ...admin,
        'content-type': 'application/json',
      });
      assert.equal(missing.statusCode, 404, missing.body);
      const account = await t.createAccount();
      const deleted = await send('DELETE', `/admin/accounts/${account.row.id}`, undefined, {
        ...admin,
        'content-type': 'application/json',
      });
      assert.equal(deleted.statusCode, 204, deleted.body);
    });

    it('says the body is empty where one is needed, and refuses one where none is taken', async () => {
      refused(await send('POST', '/lists', ''), 400, [], /body is empty/);
      refused(await postJson('/webhooks/secret/rotate', { force: true }), 400, [
        { field: 'force', message: /takes no body/ },
      ]);
      assert.equal((await send('POST', '/webhooks/secret/rotate', '{}')).statusCode, 200);
    });

    it('answers a path that is not UTF-8 in the error shape', async () => {
      refused(await send('GET', '/contacts/batch/%ff'), 400, [], /percent-escape/);
    });
  });

  describe('unknown fields and plain words', () => {
    it('refuses an unknown field at the top of a body, with the known field it probably meant', async () => {
      const response = await postJson('/contacts/batch', {
        createUpdateContacts: [{ email: 'a@example.com' }],
        webHookUrl: 'https://example.com/',
      });
      refused(response, 400, [{ field: 'webHookUrl', message: /^is not a known field; did you mean webhookUrl\?$/ }]);
      refused(await postJson('/lists', { name: 'x', colour: 'red' }), 400, [
        { field: 'colour', message: /^is not a known field$/ },
      ]);
      refused(await postJson('/contacts/batch', { createUpdateContacts: [{ emial: 'a@example.com' }] }), 400, [
        { field: 'createUpdateContacts[0].emial', message: /did you mean email\?/ },
      ]);
    });

    it("points `name` to the spec's `propertyname`, a field it is no misspelling of", async () => {
      refused(await postJson('/contacts/properties', { name: 'tier' }), 400, [
        { field: 'propertyname', message: /^is required$/ },
        { field: 'name', message: /^is not a known field; did you mean propertyname\?$/ },
      ]);
      const field = { name: 'tier', propertyvalue: 'gold' };
      const contacts = [{ email: 'a@example.com', propertyfields: [field] }];
      refused(await postJson('/contacts/batch', { createUpdateContacts: contacts }), 400, [
        { field: 'createUpdateContacts[0].propertyfields[0].name', message: /did you mean propertyname\?$/ },
      ]);
    });

    it('refuses unknown query parameters, on routes with and without a query schema', async () => {
      const list = (await send('GET', '/lists')).json().lists[0].listId;
      refused(await send('GET', `/lists/${list}/contacts?limt=5`), 400, [
        { field: 'limt', message: /did you mean limit\?/ },
      ]);
      refused(await send('GET', '/lists?page=2'), 400, [{ field: 'page', message: /^is not a known field$/ }]);
    });

    it('says what a number in a query string or path must be, never a regular expression', async () => {
      const list = (await send('GET', '/lists')).json().lists[0].listId;
      refused(await send('GET', `/lists/${list}/contacts?limit=1001`), 400, [
        { field: 'limit', message: /^must be 1 to 1000$/ },
      ]);
      refused(await send('GET', `/lists/${list}/contacts?limit=1&limit=2`), 400, [
        { field: 'limit', message: /^must be 1 to 1000$/ },
      ]);
      refused(await send('GET', '/webhooks/deliveries?limit=0'), 400, [
        { field: 'limit', message: /^must be 1 to 100$/ },
      ]);
      refused(await send('GET', '/contacts?mobile=%2B4479'), 400, [
        { field: 'mobile', message: /^is the country code and number, digits only/ },
      ]);
      refused(await send('GET', '/contacts/0'), 400, [{ field: 'contactId', message: /^must be a contact id/ }]);
      refused(await send('GET', '/contacts/batch/not-a-uuid'), 400, [{ field: 'batchId', message: /^must be a UUID/ }]);
      const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
      refused(await send('GET', '/admin/jobs?state=gone', undefined, admin), 400, [
        { field: 'state', message: /^must be one of ready, running, dead$/ },
      ]);
      refused(await send('POST', '/admin/jobs/x/retry', undefined, admin), 400, [
        { field: 'id', message: /^must be a job id/ },
      ]);
    });
  });

  describe('webhook URLs, when the request names them', () => {
    const privateUrls = ['http://127.0.0.1/hook', 'http://localhost:8080/hook', 'http://[::1]/hook'];
    for (const url of [...privateUrls, 'http://0x7f000001/hook', 'http://[64:ff9b::7f00:1]/']) {
      it(`refuses ${url} with 422 naming the field, and queues nothing`, async () => {
        const response = await postJson('/contacts/batch', {
          createUpdateContacts: [{ email: 'a@example.com' }],
          webhookUrl: url,
        });
        refused(response, 422, [
          {
            field: 'webhookUrl',
            message: /address; webhooks are only posted to public addresses \(unless .*WEBHOOK_ALLOW_PRIVATE\)$/,
          },
        ]);
        assert.deepEqual(await t.ctx.db.selectFrom('jobs').select('id').execute(), []);
      });
    }

    it('refuses cloud metadata addresses in every webhook field, even with WEBHOOK_ALLOW_PRIVATE=true', async () => {
      const open = await startTestApp(dialect, { database: t.database, env: { WEBHOOK_ALLOW_PRIVATE: 'true' } });
      try {
        const token = await open.tokenFor(await open.createAccount());
        const headers = { ...bearer(token), 'content-type': 'application/json' };
        const request = (method: 'POST' | 'PATCH', url: string, body: unknown) =>
          open.app.inject({ method, url, headers, payload: JSON.stringify(body) });
        const emailBody = Buffer.from('<p>Hi</p>').toString('base64');
        const email = { senderFrom: { email: 'news@mail.localhost', displayName: 'News' }, subject: 'Hi', emailBody };
        const sms = { senderName: 'HERALD', body: 'Hi' };
        const contacts = [{ email: 'a@example.com' }];
        const recipients = [{ mobileNo: '919812345678' }];
        const fields: Array<[string, 'POST' | 'PATCH', string, (url: string) => unknown]> = [
          ['webhookUrl', 'POST', '/contacts/batch', (url) => ({ createUpdateContacts: contacts, webhookUrl: url })],
          ['webHookUrl', 'POST', '/sms/single', (url) => ({ ...sms, recipient: '919812345678', webHookUrl: url })],
          ['webHookUrl', 'POST', '/sms/batch', (url) => ({ ...sms, recipients, webHookUrl: url })],
          [
            'sendingDetails.webHookUrl',
            'POST',
            '/email/batch',
            (url) => ({
              sendingDetails: { ...email, webHookUrl: url },
              recipients: [{ to: 'ada@example.com' }],
            }),
          ],
          ['inboundSmsWebhookUrl', 'PATCH', '/account', (url) => ({ inboundSmsWebhookUrl: url })],
        ];
        const urls = [
          'http://169.254.169.254/latest/meta-data',
          'http://[fe80::1]/',
          'http://[fd00:ec2::254]/',
          'http://100.100.100.200/',
          'http://[::ffff:169.254.169.254]/',
          'http://metadata.google.internal/v1/',
        ];
        const never = /never posted there, whatever WEBHOOK_ALLOW_PRIVATE says$/;
        for (const [field, method, path, body] of fields) {
          for (const url of urls) refused(await request(method, path, body(url)), 422, [{ field, message: never }]);
          const accepted = await request(method, path, body('http://10.0.0.1/hook'));
          assert.ok(accepted.statusCode < 300, `${path} takes a private address when allowed: ${accepted.body}`);
        }
        const deliveries = open.ctx.db.selectFrom('jobs').select('id').where('kind', '=', 'webhook.deliver');
        assert.equal((await deliveries.execute()).length, 0);
      } finally {
        await open.close();
      }
    });

    it('refuses a URL that is not http or https with 400', async () => {
      const response = await postJson('/contacts/batch', {
        createUpdateContacts: [{ email: 'a@example.com' }],
        webhookUrl: 'ftp://example.com/hook',
      });
      refused(response, 400, [{ field: 'webhookUrl', message: /^must be an http or https URL/ }]);
    });
  });
});
