import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import { forEachDatabase } from '../support/databases.ts';
import { ADMIN_TOKEN, bearer, errorFields, startTestApp, type TestApp } from '../support/app.ts';

forEachDatabase((dialect) => {
  let t: TestApp;
  beforeEach(async () => {
    t = await startTestApp(dialect);
  });
  afterEach(() => t.close());

  const admin = (method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE', url: string, payload?: object) =>
    t.app.inject({ method, url, headers: bearer(ADMIN_TOKEN), payload });

  it('creates an account with the spec time-zone form and locale, and lists it', async () => {
    const created = await admin('POST', '/admin/accounts', {
      userName: 'Ada@Example.com',
      password: 'correct horse battery staple',
      timeZoneOffset: 'UTC+05:30~India Standard Time',
      locale: 'en-IN',
    });
    assert.equal(created.statusCode, 201);
    const body = created.json();
    assert.match(body.accountId, /^[0-9a-f-]{36}$/);
    assert.match(body.privateToken, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.equal(body.userName, 'Ada@Example.com');
    assert.equal(body.timeZoneOffset, 'UTC+05:30~India Standard Time');
    assert.equal(body.locale, 'en-IN');

    const listed = await admin('GET', '/admin/accounts');
    assert.deepEqual(
      listed.json().accounts.map((a: { accountId: string }) => a.accountId),
      [body.accountId],
    );

    const token = await t.tokenFor({
      row: undefined as never,
      userName: 'ada@example.com',
      password: 'correct horse battery staple',
      privateToken: body.privateToken,
    });
    const own = await t.app.inject({ method: 'GET', url: '/account', headers: bearer(token) });
    assert.equal(own.json().timeZoneOffset, 'UTC+05:30~India Standard Time');
  });

  it(
    'keeps only a hash of the private token: shown at creation and rotation, never in reads or replays, nor in ' +
      'the database or an Idempotency-Key record, sealed or not',
    async () => {
      const create = () =>
        t.app.inject({
          method: 'POST',
          url: '/admin/accounts',
          headers: { ...bearer(ADMIN_TOKEN), 'idempotency-key': 'create-ada' },
          payload: { userName: 'ada@example.com', password: 'correct horse battery staple' },
        });
      const created = await create();
      assert.equal(created.statusCode, 201);
      const { accountId, privateToken } = created.json();
      const replayed = await create();
      assert.equal(replayed.headers['idempotent-replayed'], 'true');
      const { privateToken: _, ...withoutToken } = created.json();
      assert.deepEqual(replayed.json(), withoutToken, 'a replay answers the account without its token');

      assert.equal((await admin('GET', `/admin/accounts/${accountId}`)).json().privateToken, undefined);
      assert.equal((await admin('GET', '/admin/accounts')).json().accounts[0].privateToken, undefined);
      const dump = JSON.stringify([
        await t.database.db.selectFrom('accounts').selectAll().execute(),
        await t.database.db.selectFrom('idempotency_keys').selectAll().execute(),
      ]);
      assert.ok(!dump.toLowerCase().includes(privateToken), 'the token is nowhere in clear');
      assert.ok(!dump.includes(privateToken.replaceAll('-', '')));

      const account = {
        row: undefined as never,
        userName: 'ada@example.com',
        password: 'correct horse battery staple',
        privateToken: privateToken.toUpperCase(),
      };
      assert.ok(await t.tokenFor(account), 'the token is taken in either letter case');
      const rotated = await admin('POST', `/admin/accounts/${accountId}/rotate-private-token`);
      const fresh = rotated.json().privateToken;
      assert.match(fresh, /^[0-9a-f-]{36}$/);
      await assert.rejects(t.tokenFor(account), /401/, 'the old token no longer signs in');
      assert.ok(await t.tokenFor({ ...account, privateToken: fresh }));
    },
  );

  it('changes only the settings PATCH /account gives, answers them, and refuses an empty or bad one', async () => {
    const account = await t.createAccount();
    const token = await t.tokenFor(account);
    const patch = (payload: object) =>
      t.app.inject({ method: 'PATCH', url: '/account', headers: bearer(token), payload });
    const changed = await patch({ timeZoneOffset: 'UTC+05:30~India Standard Time', locale: 'en-IN' });
    assert.equal(changed.statusCode, 200, changed.body);
    assert.deepEqual(
      [changed.json().timeZoneOffset, changed.json().locale, changed.json().smartEncoding],
      ['UTC+05:30~India Standard Time', 'en-IN', true],
    );
    assert.equal((await patch({ smartEncoding: false })).json().locale, 'en-IN', 'the rest kept');
    const own = (await t.app.inject({ method: 'GET', url: '/account', headers: bearer(token) })).json();
    assert.deepEqual(
      [own.timeZoneOffset, own.locale, own.smartEncoding, own.verify],
      ['UTC+05:30~India Standard Time', 'en-IN', false, { allowedCountries: null, prefixLimit: 10 }],
    );
    assert.equal((await patch({})).statusCode, 400);
    assert.equal((await patch({ timeZoneOffset: 'noon' })).statusCode, 400);
    assert.equal((await patch({ verify: { prefixLimit: 0 } })).statusCode, 400);
  });

  it('refuses a user name taken in another letter case with 409', async () => {
    await admin('POST', '/admin/accounts', { userName: 'ada@example.com', password: 'correct horse battery staple' });
    const again = await admin('POST', '/admin/accounts', {
      userName: 'ADA@EXAMPLE.COM',
      password: 'correct horse battery staple',
    });
    assert.equal(again.statusCode, 409);
  });

  const invalid: Array<[string, object, string]> = [
    ['a user name that is not an email', { userName: 'ada' }, 'userName'],
    ['a short password', { password: 'short' }, 'password'],
    ['an offset without a name', { timeZoneOffset: 'UTC+05:30' }, 'timeZoneOffset'],
    ['an offset past +14:00', { timeZoneOffset: 'UTC+15:00~Nowhere' }, 'timeZoneOffset'],
    ['an offset not on a quarter hour', { timeZoneOffset: 'UTC+05:20~Odd' }, 'timeZoneOffset'],
    ['a locale that is not a language tag', { locale: 'not a locale!' }, 'locale'],
  ];
  for (const [what, change, field] of invalid) {
    it(`refuses ${what} with 400 naming ${field}`, async () => {
      const response = await admin('POST', '/admin/accounts', {
        userName: 'ada@example.com',
        password: 'correct horse battery staple',
        ...change,
      });
      assert.equal(response.statusCode, 400);
      assert.deepEqual(errorFields(response), [field]);
      assert.equal((await admin('GET', '/admin/accounts')).json().accounts.length, 0);
    });
  }

  it('accepts UTC-03:30 and UTC+05:45', async () => {
    for (const [i, offset] of ['UTC-03:30~Newfoundland Standard Time', 'UTC+05:45~Nepal Time'].entries()) {
      const response = await admin('POST', '/admin/accounts', {
        userName: `tz${i}@example.com`,
        password: 'correct horse battery staple',
        timeZoneOffset: offset,
      });
      assert.equal(response.statusCode, 201);
    }
  });

  it('registers sender names and domains, validated, per account', async () => {
    const { accountId } = (
      await admin('POST', '/admin/accounts', { userName: 'ada@example.com', password: 'correct horse battery staple' })
    ).json();
    assert.equal((await admin('POST', `/admin/accounts/${accountId}/sender-names`, { name: 'ACME' })).statusCode, 201);
    assert.equal(
      (await admin('POST', `/admin/accounts/${accountId}/sender-names`, { name: '14155550100' })).statusCode,
      201,
    );
    assert.equal(
      (await admin('POST', `/admin/accounts/${accountId}/sender-names`, { name: 'TOOLONGSENDER' })).statusCode,
      400,
    );
    assert.equal((await admin('POST', `/admin/accounts/${accountId}/sender-names`, { name: 'AC-ME' })).statusCode, 400);
    assert.deepEqual((await admin('GET', `/admin/accounts/${accountId}/sender-names`)).json(), {
      senderNames: ['14155550100', 'ACME'],
    });

    assert.equal(
      (await admin('POST', `/admin/accounts/${accountId}/sender-domains`, { domain: 'Mail.Example.com' })).statusCode,
      201,
    );
    assert.equal(
      (await admin('POST', `/admin/accounts/${accountId}/sender-domains`, { domain: 'not a domain' })).statusCode,
      400,
    );
    assert.deepEqual(
      (await admin('GET', `/admin/accounts/${accountId}/sender-domains`))
        .json()
        .senderDomains.map((d: { domain: string }) => d.domain),
      ['mail.example.com'],
    );

    const missing = await admin('POST', '/admin/accounts/00000000-0000-4000-8000-000000000000/sender-names', {
      name: 'ACME',
    });
    assert.equal(missing.statusCode, 404);
  });
});
