import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { sql, type KyselyPlugin } from 'kysely';
import { RoutingTable, type RouteRow } from '../../src/sms/routing/table.ts';
import { bumpRoutingVersion, routingVersion } from '../../src/sms/routing/version.ts';
import { segment } from '../../src/sms/segments.ts';
import { routedTransport } from '../../src/sms/transports/routed.ts';
import { sandboxTransport } from '../../src/sms/transports/sandbox.ts';
import { forEachDatabase } from '../support/databases.ts';
import { ADMIN_TOKEN, bearer, errorFields, startTestApp, type TestApp } from '../support/app.ts';
import { waitForLockWait } from '../support/wait.ts';

// The operator's SMS routes (ARCHITECTURE.md, "SMS routes (operator)"): src/sms/routing/.

describe('RoutingTable', () => {
  const route = (prefix: string, smsc: string, accountId: string | null = null): RouteRow => ({
    accountId,
    prefix,
    smsc: [smsc],
    priceMicros: null,
    currency: null,
  });
  const table = new RoutingTable([
    route('', 'any'),
    route('44', 'uk'),
    route('447', 'uk-mobile'),
    route('49', 'de-for-a', 'a'),
    route('4915', 'de-mobile'),
  ]);
  const via = (accountId: string, address: string) => table.routeFor(accountId, address)?.smsc[0];

  it('takes the longest matching prefix among the routes for every account', () => {
    assert.equal(via('b', '447700900123'), 'uk-mobile');
    assert.equal(via('b', '442071838750'), 'uk');
    assert.equal(via('b', '15550100'), 'any', 'the empty prefix matches every number');
    assert.equal(via('b', '4915123456789'), 'de-mobile');
  });

  it("takes the account's own route first, even over a longer prefix for every account", () => {
    assert.equal(via('a', '4915123456789'), 'de-for-a');
    assert.equal(via('a', '447700900123'), 'uk-mobile', 'and the rest where it has none');
  });

  it('matches nothing when no prefix does', () => {
    const narrow = new RoutingTable([route('44', 'uk')]);
    assert.equal(narrow.routeFor('a', '15550100'), undefined);
  });
});

forEachDatabase((dialect) => {
  let t: TestApp;
  beforeEach(async () => {
    t = await startTestApp(dialect);
  });
  afterEach(() => t.close());

  const admin = (method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, payload?: object) =>
    t.app.inject({ method, url, headers: bearer(ADMIN_TOKEN), payload });
  const smscUrl = 'smpp://herald:s3cret@127.0.0.1:2776?binds=1&window=10';

  it('adds connections, shows their passwords as *** and keeps them sealed, and lists `default` first', async () => {
    const added = await admin('POST', '/admin/smsc', { name: 'eu-1', url: smscUrl });
    assert.equal(added.statusCode, 201, added.body);
    assert.deepEqual(added.json(), { name: 'eu-1', url: 'smpp://herald:***@127.0.0.1:2776?binds=1&window=10' });
    assert.equal((await admin('POST', '/admin/smsc', { name: 'lab', url: 'sandbox:' })).statusCode, 201);

    const listed = await admin('GET', '/admin/smsc');
    assert.equal(listed.statusCode, 200);
    assert.deepEqual(listed.json(), {
      smsc: [
        { name: 'default', url: 'sandbox:', state: 'sandbox', binds: 0 },
        { name: 'eu-1', url: 'smpp://herald:***@127.0.0.1:2776?binds=1&window=10', state: 'down', binds: 0 },
        { name: 'lab', url: 'sandbox:', state: 'sandbox', binds: 0 },
      ],
    });
    const rows = await t.ctx.db.selectFrom('smsc_connections').selectAll().execute();
    assert.equal(rows.length, 2);
    for (const row of rows) assert.ok(!JSON.stringify(row).includes('s3cret'), 'the password is never stored in clear');
  });

  it('refuses a URL SMS_TRANSPORT would refuse, a bad name, a name taken and `default`', async () => {
    const bad = await admin('POST', '/admin/smsc', { name: 'eu', url: 'http://example.com' });
    assert.equal(bad.statusCode, 400);
    assert.deepEqual(errorFields(bad), ['url']);
    const longPassword = await admin('POST', '/admin/smsc', { name: 'eu', url: 'smpp://herald:ninechars@host:2775' });
    assert.equal(longPassword.statusCode, 400);
    assert.ok(!longPassword.body.includes('ninechars'), 'the refusal does not show the password');
    assert.equal((await admin('POST', '/admin/smsc', { name: 'EU 1', url: 'sandbox:' })).statusCode, 400);
    assert.equal((await admin('POST', '/admin/smsc', { name: 'eu', url: 'sandbox:' })).statusCode, 201);
    assert.equal((await admin('POST', '/admin/smsc', { name: 'eu', url: smscUrl })).statusCode, 409);
    assert.equal((await admin('POST', '/admin/smsc', { name: 'default', url: smscUrl })).statusCode, 409);
  });

  it('shows a connection up with the binds of the worker processes seen lately, down once they are stale', async () => {
    await admin('POST', '/admin/smsc', { name: 'eu', url: smscUrl });
    const now = t.clock.now();
    await t.ctx.db
      .insertInto('smsc_binds')
      .values([
        { process: 'worker-a', smsc: 'eu', binds: 1, seen_at: now - 1_000 },
        { process: 'worker-b', smsc: 'eu', binds: 2, seen_at: now - 2_000 },
        { process: 'worker-c', smsc: 'eu', binds: 4, seen_at: now - 60_000 },
      ])
      .execute();
    const eu = async () => (await admin('GET', '/admin/smsc')).json().smsc[1];
    assert.deepEqual(await eu(), {
      name: 'eu',
      url: 'smpp://herald:***@127.0.0.1:2776?binds=1&window=10',
      state: 'up',
      binds: 3,
    });
    t.clock.advance(30_000);
    assert.deepEqual({ ...(await eu()), url: undefined }, { name: 'eu', url: undefined, state: 'down', binds: 0 });
  });

  it('replaces the routing table whole and reads it back in its order, prices as decimal strings', async () => {
    await admin('POST', '/admin/smsc', { name: 'uk', url: 'sandbox:' });
    await admin('POST', '/admin/smsc', { name: 'eu', url: 'sandbox:' });
    const account = await t.createAccount();
    const routes = [
      { prefix: '44', smsc: ['uk', 'eu'], pricePerPart: '0.0075', currency: 'GBP' },
      { prefix: '', smsc: ['default'] },
      { prefix: '4915', smsc: ['eu'], pricePerPart: '0.05', currency: 'EUR', accountId: account.row.id },
    ];
    const before = await routingVersion(t.ctx.db);
    const put = await admin('PUT', '/admin/sms-routes', { routes });
    assert.equal(put.statusCode, 200, put.body);
    const expected = [routes[0], routes[1], { ...routes[2], pricePerPart: '0.05' }];
    assert.deepEqual(put.json(), { routes: expected });
    assert.deepEqual((await admin('GET', '/admin/sms-routes')).json(), { routes: expected });
    assert.ok((await routingVersion(t.ctx.db)) > before, 'every process sees the change by the version');

    const again = await admin('PUT', '/admin/sms-routes', { routes: [{ prefix: '1', smsc: ['eu'] }] });
    assert.equal(again.statusCode, 200);
    assert.deepEqual((await admin('GET', '/admin/sms-routes')).json(), { routes: [{ prefix: '1', smsc: ['eu'] }] });
    assert.equal((await admin('PUT', '/admin/sms-routes', { routes: [] })).statusCode, 200);
    assert.deepEqual((await admin('GET', '/admin/sms-routes')).json(), { routes: [] });
  });

  it('refuses a table naming a connection or an account that does not exist, and changes nothing', async () => {
    await admin('POST', '/admin/smsc', { name: 'eu', url: 'sandbox:' });
    await admin('PUT', '/admin/sms-routes', { routes: [{ prefix: '49', smsc: ['eu'] }] });
    const unknown = await admin('PUT', '/admin/sms-routes', {
      routes: [
        { prefix: '44', smsc: ['eu', 'nowhere'] },
        { prefix: '1', smsc: ['eu'], accountId: '00000000-0000-4000-8000-000000000000' },
      ],
    });
    assert.equal(unknown.statusCode, 422);
    assert.deepEqual(errorFields(unknown), ['routes[0].smsc[1]', 'routes[1].accountId']);
    assert.deepEqual((await admin('GET', '/admin/sms-routes')).json(), { routes: [{ prefix: '49', smsc: ['eu'] }] });
  });

  it('refuses a malformed table with the fields at fault', async () => {
    const cases: Array<[object, string[]]> = [
      [{ prefix: '44', smsc: ['default'], pricePerPart: '0.01' }, ['routes[0].currency']],
      [{ prefix: '44', smsc: ['default'], pricePerPart: '1e-3', currency: 'EUR' }, ['routes[0].pricePerPart']],
      [{ prefix: '44', smsc: ['default'], pricePerPart: '0.0000001', currency: 'EUR' }, ['routes[0].pricePerPart']],
      [{ prefix: '44', smsc: ['default'], pricePerPart: '-1', currency: 'EUR' }, ['routes[0].pricePerPart']],
      // Beyond what a day's parts may add up to in a 64-bit sum of micro-units.
      [{ prefix: '44', smsc: ['default'], pricePerPart: '100000', currency: 'EUR' }, ['routes[0].pricePerPart']],
      [{ prefix: '44', smsc: ['default'], pricePerPart: '1', currency: 'eur' }, ['routes[0].currency']],
      [{ prefix: '44', smsc: ['default', 'default'] }, ['routes[0].smsc']],
      [{ prefix: '+44', smsc: ['default'] }, ['routes[0].prefix']],
      [{ prefix: '44', smsc: [] }, ['routes[0].smsc']],
      [{ prefix: '44', smsc: ['Bad Name'] }, ['routes[0].smsc[0]']],
      [{ prefix: '4\u00004', smsc: ['default'] }, ['routes[0].prefix']],
      [{ prefix: '44', smsc: ['default'], accountId: 'not-a-uuid' }, ['routes[0].accountId']],
    ];
    for (const [route, fields] of cases) {
      const response = await admin('PUT', '/admin/sms-routes', { routes: [route] });
      assert.equal(response.statusCode, 400, `${JSON.stringify(route)}: ${response.body}`);
      assert.deepEqual(errorFields(response), fields, JSON.stringify(route));
    }
    const twice = await admin('PUT', '/admin/sms-routes', {
      routes: [
        { prefix: '44', smsc: ['default'] },
        { prefix: '44', smsc: ['default'] },
      ],
    });
    assert.equal(twice.statusCode, 400);
    assert.deepEqual(errorFields(twice), ['routes[1].prefix']);
    assert.deepEqual((await admin('GET', '/admin/sms-routes')).json(), { routes: [] });
  });

  it('removes a connection, but not `default`, one a route names, or one whose parts await receipts', async () => {
    await admin('POST', '/admin/smsc', { name: 'eu', url: 'sandbox:' });
    await admin('PUT', '/admin/sms-routes', { routes: [{ prefix: '49', smsc: ['default', 'eu'] }] });
    assert.equal((await admin('DELETE', '/admin/smsc/default')).statusCode, 409);
    assert.equal((await admin('DELETE', '/admin/smsc/nowhere')).statusCode, 404);
    assert.equal((await admin('DELETE', '/admin/smsc/eu')).statusCode, 409, 'a route names it');

    await admin('PUT', '/admin/sms-routes', { routes: [] });
    // A part the connection took, awaiting its receipt.
    const account = await t.createAccount();
    const sent = await t.app.inject({
      method: 'POST',
      url: '/sms/single',
      headers: bearer(await t.tokenFor(account)),
      payload: { recipient: '919812345678', senderName: 'HERALD', body: 'Hi' },
    });
    assert.equal(sent.statusCode, 202, sent.body);
    const recipient = await t.ctx.db.selectFrom('send_recipients').select('id').executeTakeFirstOrThrow();
    await t.ctx.db
      .insertInto('sms_parts')
      .values({ recipient_id: recipient.id, part: 9, operator_message_id: 'eu-1', status: 'Submitted', smsc: 'eu' })
      .execute();
    assert.equal((await admin('DELETE', '/admin/smsc/eu')).statusCode, 409, 'a part awaits its receipt');

    await sql`update sms_parts set status = 'Delivered' where operator_message_id = 'eu-1'`.execute(t.ctx.db);
    // A part it took on a page still in flight: answered, its outcome not yet recorded.
    const sendId = sent.json().data.QueueId as string;
    const submit = { send_id: sendId, recipient: '919812345678', part: 1, parts: 1, at: 0, smsc: 'eu' };
    await t.ctx.db
      .insertInto('smpp_submits')
      .values({ ...submit, operator_message_id: 'eu-2' })
      .execute();
    assert.equal((await admin('DELETE', '/admin/smsc/eu')).statusCode, 409, 'a page in flight');
    // Recorded: the answer is kept until the retention sweep, and holds nothing back meanwhile.
    await t.ctx.db.updateTable('send_recipients').set({ status: 'Submitted' }).where('id', '=', recipient.id).execute();
    assert.equal((await admin('DELETE', '/admin/smsc/eu')).statusCode, 204);
    assert.deepEqual(
      (await admin('GET', '/admin/smsc')).json().smsc.map((c: { name: string }) => c.name),
      ['default'],
    );
  });

  it('removes a connection only after a table naming it that is being written: then 409', async () => {
    await admin('POST', '/admin/smsc', { name: 'eu', url: 'sandbox:' });
    const committing = Promise.withResolvers<void>();
    // PUT /admin/sms-routes naming it, in its transaction, not yet committed.
    const naming = t.ctx.db.transaction().execute(async (trx) => {
      await bumpRoutingVersion(trx);
      await trx
        .insertInto('sms_routes')
        .values({ position: 0, account_id: null, prefix: '', smsc: '["eu"]', price_micros: null, currency: null })
        .execute();
      await committing.promise;
    });
    let settled = false;
    const removing = admin('DELETE', '/admin/smsc/eu').finally(() => (settled = true));
    if (dialect === 'postgres') await waitForLockWait(t.ctx.db, 'the DELETE to wait for the table', () => settled);
    committing.resolve();
    await naming;
    assert.equal((await removing).statusCode, 409);
    assert.deepEqual(
      (await admin('GET', '/admin/smsc')).json().smsc.map((c: { name: string }) => c.name),
      ['default', 'eu'],
    );
  });

  it('holds a message until its first read of the routes is applied: not sent by `default` meanwhile', async () => {
    await admin('POST', '/admin/smsc', { name: 'uk', url: 'sandbox:' });
    await admin('PUT', '/admin/sms-routes', { routes: [{ prefix: '44', smsc: ['uk'] }] });
    // The routes' rows held back once read: by then the transport has read the version.
    const held = Promise.withResolvers<void>();
    const reading = Promise.withResolvers<void>();
    const routesReads = new WeakSet<object>();
    const gate: KyselyPlugin = {
      transformQuery({ node, queryId }) {
        if (JSON.stringify(node).includes('"sms_routes"')) routesReads.add(queryId);
        return node;
      },
      async transformResult({ queryId, result }) {
        if (routesReads.has(queryId)) {
          reading.resolve();
          await held.promise;
        }
        return result;
      },
    };
    const sandbox = (name?: string) =>
      sandboxTransport(t.ctx.database, t.clock, { key: t.ctx.encryptionKey, ...(name && { name }) });
    const transport = routedTransport({
      db: t.ctx.db.withPlugin(gate),
      keyring: t.ctx.encryptionKey,
      defaultTransport: sandbox(),
      defaultSet: false,
      open: (connection) => sandbox(connection.name),
    });
    try {
      await reading.promise;
      const message = {
        accountId: (await t.createAccount()).row.id,
        sendId: crypto.randomUUID(),
        messageId: crypto.randomUUID(),
        recipient: '919876543210',
        sender: 'HERALD',
        segmented: segment('Your code is 4829', { reference: 1 }),
        sensitive: false,
      };
      const sent = transport.submit([message], new AbortController().signal);
      held.resolve();
      assert.deepEqual(await sent, [{ accepted: false, permanent: true, error: 'no route', errorCode: null }]);
    } finally {
      held.resolve();
      await transport.close();
    }
  });

  it('refuses account tokens on every route of the admin API', async () => {
    const token = await t.tokenFor(await t.createAccount());
    const requests = [
      { method: 'POST', url: '/admin/smsc', payload: { name: 'eu', url: 'sandbox:' } },
      { method: 'GET', url: '/admin/smsc' },
      { method: 'DELETE', url: '/admin/smsc/eu' },
      { method: 'PUT', url: '/admin/sms-routes', payload: { routes: [] } },
      { method: 'GET', url: '/admin/sms-routes' },
    ] as const;
    for (const request of requests) {
      const response = await t.app.inject({ ...request, headers: bearer(token) });
      assert.equal(response.statusCode, 401, `${request.method} ${request.url}`);
    }
    assert.equal(await t.ctx.db.selectFrom('smsc_connections').select('name').executeTakeFirst(), undefined);
  });
});
