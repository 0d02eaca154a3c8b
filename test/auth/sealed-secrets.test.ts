import assert from 'node:assert/strict';
import { createHash, createHmac, createSecretKey, randomBytes, randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, it } from 'node:test';
import { DatabaseSync } from 'node:sqlite';
import { Migrator, sql } from 'kysely';
import pg from 'pg';
import { Webhook } from 'standardwebhooks';
import { createAccount } from '../../src/accounts/service.ts';
import { expiryFor, signAccessToken } from '../../src/auth/tokens.ts';
import { ManualClock } from '../../src/clock.ts';
import { ConfigError, parseSmsTransport } from '../../src/config.ts';
import { migrateToLatest, sqlitePath } from '../../src/db/database.ts';
import { ERASE_PENDING } from '../../src/db/erase.ts';
import { migrations } from '../../src/db/migrations/index.ts';
import { signingKeyFor } from '../../src/senders/dkim-keys.ts';
import { openConnections } from '../../src/sms/routing/connections.ts';
import { signEmail } from '../../src/email/dkim.ts';
import { webhookDeliveryHandler } from '../../src/webhooks/deliver.ts';
import { emitEvent, emitWebhook } from '../../src/webhooks/outbox.ts';
import { appendWebhookEvents, GATHER_KIND, GATHER_WINDOW_MS, webhookGatherHandler } from '../../src/webhooks/events.ts';
import { Worker } from '../../src/queue/worker.ts';
import { createTestDatabase, forEachDatabase, type TestDatabase } from '../support/databases.ts';
import { ADMIN_TOKEN, bearer, startTestApp, type TestApp } from '../support/app.ts';
import { herald } from '../cli/support.ts';
import { pgDump } from '../support/storage.ts';
import { mailauthVerdict } from '../email/dkim-verifiers.ts';
import { runDeliveryJob, startReceiver, type Received, type Receiver } from '../webhooks/support.ts';

// The token key and the webhook secrets rest sealed (issue 27): src/server/stored-secrets.ts.

/** Runs of 16 printable ASCII characters or more in raw bytes, as `strings -n 16` finds them. */
function printableRuns(bytes: Buffer): Set<string> {
  return new Set(bytes.toString('latin1').match(/[\x20-\x7e]{16,}/g) ?? []);
}

/**
 * Every string the database holds as it rests: SQLite's file and its WAL; on PostgreSQL, all of
 * a pg_dump and the bytes of the files of every table, TOAST table and index of the schema, where
 * a dead row version stays until it is written over (the PostgreSQL under test is on this
 * machine, and the tests run as a user that reads its files).
 */
async function restingStrings(database: TestDatabase): Promise<Set<string>> {
  const file = sqlitePath(database.url);
  if (file !== undefined) {
    const runs = printableRuns(readFileSync(file));
    if (existsSync(`${file}-wal`)) for (const run of printableRuns(readFileSync(`${file}-wal`))) runs.add(run);
    return runs;
  }
  const runs = printableRuns(await pgDump(database.url));
  await sql`checkpoint`.execute(database.db);
  const { rows: directory } = await sql<{ data_directory: string }>`show data_directory`.execute(database.db);
  const { rows: files } = await sql<{ path: string }>`
    select pg_relation_filepath(oid) as path from pg_class
     where relnamespace = 'public'::regnamespace and relkind in ('r', 'i')
    union all
    select pg_relation_filepath(reltoastrelid) from pg_class
     where relnamespace = 'public'::regnamespace and reltoastrelid <> 0`.execute(database.db);
  for (const { path } of files) {
    for (const run of printableRuns(readFileSync(join(directory[0].data_directory, path)))) runs.add(run);
  }
  return runs;
}

/**
 * A read transaction on a connection of its own until the answer's release: the row versions
 * written before it stay where they are (PostgreSQL prunes none a snapshot may see; SQLite
 * starts its WAL anew only once no reader uses it), whatever a checkpoint or a vacuum does.
 */
async function holdingOldVersions(database: TestDatabase): Promise<() => Promise<void>> {
  const file = sqlitePath(database.url);
  if (file !== undefined) {
    const reader = new DatabaseSync(file);
    reader.exec('begin');
    reader.prepare('select count(*) from sqlite_master').get();
    return async () => {
      reader.exec('commit');
      reader.close();
    };
  }
  const reader = new pg.Client({ connectionString: database.url });
  await reader.connect();
  await reader.query('begin isolation level repeatable read');
  await reader.query('select 1');
  return async () => {
    await reader.query('commit');
    await reader.end();
  };
}

/** Something the app signed with a key it keeps: the signed text and the HMAC-SHA256 it made of it. */
interface Signed {
  what: string;
  input: string;
  mac: Buffer;
  /** The length in bytes of the key that made it: Herald's keys are random bytes of that length. */
  keyBytes: number;
}

function signedToken(token: string, keyBytes: number): Signed {
  const [header, payload, signature] = token.split('.');
  return { what: 'an access token', input: `${header}.${payload}`, mac: Buffer.from(signature, 'base64url'), keyBytes };
}

function signedPost(post: Received, keyBytes: number): Signed[] {
  const input = `${post.headers['webhook-id']}.${post.headers['webhook-timestamp']}.${post.body}`;
  const signatures = (post.headers['webhook-signature'] as string).split(' ');
  const mac = (signature: string) => Buffer.from(signature.slice('v1,'.length), 'base64');
  return signatures.map((signature) => ({ what: 'a webhook post', input, mac: mac(signature), keyBytes }));
}

/** The bytes of a `whsec_` secret's key. */
const webhookKeyBytes = (secret: string) => Buffer.from(secret.slice('whsec_'.length), 'base64').length;

/**
 * The keys the strings give, every way a key of `size` bytes is written: as it is, in Base64
 * or Base64url, padded or not (Node's decoder takes both alphabets, RFC 4648 §4 and §5), or
 * in hex, starting at any offset of any string (a value sits between others in a row).
 */
function* candidateKeys(strings: Iterable<string>, size: number): Generator<Buffer> {
  const base64Lengths = [...new Set([Math.ceil((size * 4) / 3), Math.ceil(size / 3) * 4])];
  for (const string of strings) {
    for (let at = 0; at + size <= string.length; at++) {
      yield Buffer.from(string.slice(at, at + size), 'latin1');
      for (const length of base64Lengths) {
        if (at + length > string.length) continue;
        const decoded = Buffer.from(string.slice(at, at + length), 'base64');
        if (decoded.length === size) yield decoded;
      }
      const hex = string.slice(at, at + size * 2);
      if (hex.length === size * 2 && /^[0-9a-fA-F]+$/.test(hex)) yield Buffer.from(hex, 'hex');
    }
  }
}

/**
 * HMAC-SHA256 (RFC 2104) under a key of 64 bytes or fewer, from two hashes: createHmac imports
 * its key on every call, which took ten times as long as the hashes on this machine, and the
 * scan tries a key at every offset of every string.
 */
function hmacSha256(key: Buffer, input: string): Buffer {
  const padded = Buffer.alloc(64);
  key.copy(padded);
  const xored = (pad: number) => padded.map((byte) => byte ^ pad);
  const inner = createHash('sha256').update(xored(0x36)).update(input).digest();
  return createHash('sha256').update(xored(0x5c)).update(inner).digest();
}

/** What of `signed` a string of the database verifies: it should be nothing. */
function forgeable(strings: Set<string>, signed: Signed[]): string[] {
  const probe = randomBytes(32);
  assert.deepEqual(hmacSha256(probe, 'probe'), createHmac('sha256', probe).update('probe').digest());
  const found = new Set<string>();
  for (const size of new Set(signed.map((s) => s.keyBytes))) {
    assert.ok(size <= 64, 'a key hmacSha256 takes');
    const inputs = [...new Set(signed.filter((s) => s.keyBytes === size).map((s) => s.input))];
    for (const key of candidateKeys(strings, size)) {
      for (const input of inputs) {
        const mac = hmacSha256(key, input);
        for (const s of signed) if (s.input === input && s.mac.equals(mac)) found.add(s.what);
      }
    }
  }
  return [...found];
}

/** A post signed by each of `secrets` alone verifies, by the standardwebhooks package. */
function assertSignedBy(post: Received, secrets: string[]): void {
  const signatures = (post.headers['webhook-signature'] as string).split(' ');
  assert.equal(signatures.length, secrets.length);
  for (const [i, secret] of secrets.entries()) {
    const headers = { ...(post.headers as Record<string, string>), 'webhook-signature': signatures[i] };
    assert.ok(new Webhook(secret).verify(post.body, headers));
  }
}

const newWebhookSecret = () => `whsec_${randomBytes(32).toString('base64')}`;

const keyEnv = (key: string) => ({ ENCRYPTION_KEY: key, WEBHOOK_ALLOW_PRIVATE: 'true' });

forEachDatabase((dialect) => {
  let database: TestDatabase;
  let receiver: Receiver;
  let encryptionKey: string;
  beforeEach(async (context) => {
    // The test of a database made before the upgrade migrates its own, from empty.
    database = await createTestDatabase(dialect, { empty: context.name.startsWith('a database made before') });
    receiver = await startReceiver();
    encryptionKey = randomBytes(32).toString('hex');
  });
  afterEach(async () => {
    await receiver.close();
    await database.close();
  });

  /** A start of the service on the test's database, through the start of `serve` (stored-secrets.ts). */
  const start = (env: Record<string, string> = keyEnv(encryptionKey)) =>
    startTestApp(dialect, { database, env, clock: new ManualClock(Date.now()) });

  const get = (t: TestApp, url: string, token: string) => t.app.inject({ method: 'GET', url, headers: bearer(token) });

  /** A webhook the app posts to the receiver for the account, signed as every post is. */
  async function postedWebhook(t: TestApp, accountId: string): Promise<Received> {
    const id = await t.ctx.db
      .transaction()
      .execute((trx) =>
        emitWebhook(trx, t.clock, { accountId, url: receiver.url, type: 'contacts.batch', data: { inserted: 1 } }),
      );
    assert.equal(await runDeliveryJob(webhookDeliveryHandler(t.ctx), t.ctx.db, id), 'done');
    return receiver.received.at(-1)!;
  }

  it('leaves no string in the database, its WAL or a dump that verifies a token or a webhook signature', async () => {
    const t = await start();
    try {
      const account = await t.createAccount();
      const token = await t.tokenFor(account);
      const { secret } = (await get(t, '/webhooks/secret', token)).json();
      const rotated = await t.app.inject({ method: 'POST', url: '/webhooks/secret/rotate', headers: bearer(token) });
      assert.equal(rotated.statusCode, 200, rotated.body);
      const post = await postedWebhook(t, account.row.id);
      const signed = [signedToken(token, t.ctx.jwtKey.symmetricKeySize!), ...signedPost(post, webhookKeyBytes(secret))];
      assert.equal(signed.length, 3, 'the token, and the post signed by the new secret and the one it replaced');
      assert.deepEqual(forgeable(await restingStrings(database), signed), []);
    } finally {
      await t.close();
    }
  });

  /** What the code before the sealing wrote: the token key and both webhook secrets in clear, and a token. */
  async function databaseBeforeTheUpgrade() {
    const migrator = new Migrator({ db: database.db, provider: { getMigrations: async () => migrations } });
    assert.ifError((await migrator.migrateTo('0026_message_rows_unchained')).error);
    const now = Date.now();
    const jwtSecret = randomBytes(32).toString('base64url');
    const [secret, previousSecret] = [newWebhookSecret(), newWebhookSecret()];
    const previousExpiresAt = now + 3_600_000;
    const credentials = { userName: 'ada@example.com', password: 'correct horse battery staple' };
    const account = await createAccount(database.db, new ManualClock(now), credentials);
    await database.db.insertInto('settings').values({ key: 'jwt_secret', value: jwtSecret }).execute();
    await sql`insert into webhook_secrets
                     (account_id, secret, previous_secret, previous_expires_at, created_at, rotated_at)
              values (${account.id}, ${secret}, ${previousSecret}, ${previousExpiresAt}, ${now}, ${now})`.execute(
      database.db,
    );
    const issuedAt = Math.floor(now / 1000) * 1000;
    const subject = { accountId: account.id, tokenVersion: account.token_version };
    const oldKey = createSecretKey(Buffer.from(jwtSecret, 'base64url'));
    const token = await signAccessToken(oldKey, subject, issuedAt, expiryFor('Default', issuedAt));
    await migrateToLatest(database);
    return { account, jwtSecret, secret, previousSecret, previousExpiresAt, token };
  }

  it('a database made before the upgrade keeps its token and secrets through the start that seals them', async () => {
    const { account, secret, previousSecret, previousExpiresAt, token } = await databaseBeforeTheUpgrade();

    const t = await start();
    try {
      assert.equal((await get(t, '/account', token)).statusCode, 200, 'the token issued before still authenticates');
      const view = (await get(t, '/webhooks/secret', token)).json();
      assert.deepEqual(view, { secret, previousSecretExpiresAt: new Date(previousExpiresAt).toISOString() });
      const post = await postedWebhook(t, account.id);
      assertSignedBy(post, [secret, previousSecret]);

      const settings = await database.db.selectFrom('settings').select('key').orderBy('key').execute();
      assert.deepEqual(
        settings.map((row) => row.key),
        // The URLs' marker stays for the starts of a rolling upgrade's hour (webhooks/url-passwords.ts).
        ['sealed_erasure_key', 'sealed_jwt_secret', 'sealed_url_key', 'sealed_verify_key', 'url_passwords_to_seal'],
      );
      const row = await database.db.selectFrom('webhook_secrets').selectAll().executeTakeFirstOrThrow();
      assert.deepEqual([row.secret, row.previous_secret], [null, null]);
      const signed = [signedToken(token, 32), ...signedPost(post, 32)];
      assert.deepEqual(forgeable(await restingStrings(database), signed), [], 'none left in a free page or the WAL');
    } finally {
      await t.close();
    }
  });

  if (dialect === 'postgres') {
    it('a database made before the upgrade is rid of its clear secrets once an older transaction ends', async () => {
      const { jwtSecret, secret, previousSecret } = await databaseBeforeTheUpgrade();
      const reader = new pg.Client({ connectionString: database.url });
      await reader.connect();
      try {
        // A snapshot from before the sealing, which VACUUM FULL would keep the clear versions for.
        await reader.query('begin isolation level repeatable read');
        await reader.query('select count(*) from accounts');
        const starting = start();
        await new Promise((resolve) => setTimeout(resolve, 300));
        await reader.query('commit');
        const t = await starting;
        await t.close();
      } finally {
        await reader.end();
      }
      const runs = [...(await restingStrings(database))];
      const clear = [jwtSecret, secret, previousSecret].filter((value) => runs.some((run) => run.includes(value)));
      assert.deepEqual(clear, [], 'no clear secret in the dump or the table files');
    });
  }

  it('a database made before private tokens were hashed holds none in clear after the first start', async () => {
    const migrator = new Migrator({ db: database.db, provider: { getMigrations: async () => migrations } });
    assert.ifError((await migrator.migrateTo('0017_inbound_sms')).error);
    const privateToken = randomUUID();
    await sql`insert into accounts (id, user_name, user_name_key, password_hash, private_token, time_zone_offset,
                                    locale, created_at, updated_at)
              values (${randomUUID()}, 'ada@example.com', 'ada@example.com', 'a hash', ${privateToken}, '+00:00',
                      'en', 0, 0)`.execute(database.db);
    const release = await holdingOldVersions(database);
    const held = async () => [...(await restingStrings(database))].some((run) => run.includes(privateToken));
    try {
      await migrateToLatest(database);
      assert.ok(await held(), 'hashed by migration 0018, the token in clear is still in the files');
    } finally {
      await release();
    }
    const t = await start();
    try {
      assert.equal(await held(), false, 'the first start erased it');
      const settings = await database.db.selectFrom('settings').select('key').execute();
      assert.ok(!settings.some((row) => row.key === ERASE_PENDING), 'and left nothing for the next start to do');
    } finally {
      await t.close();
    }
  });

  it('reads a webhook secret the old code wrote in clear in a rolling upgrade; the next start seals it', async () => {
    const t = await start();
    const [alice, bob] = [await t.createAccount(), await t.createAccount()];
    const bobsOld = (await get(t, '/webhooks/secret', await t.tokenFor(bob))).json().secret;
    // The old code's first use of a secret and its rotation: the clear column only.
    const [alicesSecret, bobsNew] = [newWebhookSecret(), newWebhookSecret()];
    await sql`insert into webhook_secrets (account_id, secret, created_at)
              values (${alice.row.id}, ${alicesSecret}, ${t.clock.now()})`.execute(database.db);
    await sql`update webhook_secrets
                 set previous_secret = secret, secret = ${bobsNew}, previous_expires_at = ${t.clock.now() + 3_600_000}
               where account_id = ${bob.row.id}`.execute(database.db);
    try {
      assertSignedBy(await postedWebhook(t, alice.row.id), [alicesSecret]);
      assertSignedBy(await postedWebhook(t, bob.row.id), [bobsNew]);
    } finally {
      await t.close();
    }

    const again = await start();
    try {
      const rows = await database.db.selectFrom('webhook_secrets').selectAll().execute();
      for (const row of rows) {
        assert.deepEqual([row.secret, row.previous_secret, row.sealed_secret?.slice(0, 3)], [null, null, 'v1:']);
      }
      assert.equal((await get(again, '/webhooks/secret', await again.tokenFor(alice))).json().secret, alicesSecret);
      assertSignedBy(await postedWebhook(again, bob.row.id), [bobsNew]);
      assert.notEqual(bobsNew, bobsOld);
    } finally {
      await again.close();
    }
  });

  it('replacing ENCRYPTION_KEY seals secrets, DKIM keys and SMSC URLs anew: dropping the old loses none', async () => {
    const oldKey = encryptionKey;
    const first = await start(keyEnv(oldKey));
    const account = await first.createAccount();
    const token = await first.tokenFor(account);
    const before = (await get(first, '/webhooks/secret', token)).json().secret;
    const rotation = await first.app.inject({ method: 'POST', url: '/webhooks/secret/rotate', headers: bearer(token) });
    const rotated = rotation.json();
    const dkim = (await get(first, '/admin/dkim', ADMIN_TOKEN)).json();
    const smscUrl = 'smpp://herald:secret@127.0.0.1:2776?binds=1';
    const smsc = { name: 'eu', url: smscUrl };
    const added = await first.app.inject({
      method: 'POST',
      url: '/admin/smsc',
      headers: bearer(ADMIN_TOKEN),
      payload: smsc,
    });
    assert.equal(added.statusCode, 201, added.body);
    await first.close();

    const newKey = randomBytes(32).toString('hex');
    await (await start({ ...keyEnv(newKey), ENCRYPTION_KEY_PREVIOUS: oldKey })).close();

    const t = await start(keyEnv(newKey));
    try {
      assert.equal((await get(t, '/account', token)).statusCode, 200, 'the token still authenticates');
      assert.deepEqual((await get(t, '/webhooks/secret', token)).json(), rotated);
      assertSignedBy(await postedWebhook(t, account.row.id), [rotated.secret, before]);
      assert.deepEqual((await get(t, '/admin/dkim', ADMIN_TOKEN)).json(), dkim, 'the same DKIM key');
      const connections = await openConnections(t.ctx.db, t.ctx.encryptionKey, (name, error) => {
        throw new Error(`${name} does not open`, { cause: error });
      });
      assert.deepEqual(connections, [{ name: 'eu', url: smscUrl, transport: parseSmsTransport(smscUrl) }], 'it opens');
      const raw = Buffer.from('From: ada@mail.localhost\r\nTo: bob@example.com\r\nSubject: Hi\r\n\r\nHello\r\n');
      const service = { accountId: null, domain: 'mail.localhost' };
      const key = await signingKeyFor(t.database, t.ctx.encryptionKey, t.clock, service);
      assert.equal((await mailauthVerdict((await signEmail(raw, key)).toString(), dkim.dkim)).status, 'pass');
    } finally {
      await t.close();
    }
  });

  /** The deliveries of an event to the account's endpoints, each run once: the posts they made. */
  async function postedToEndpoints(t: TestApp, accountId: string): Promise<Received[]> {
    const before = receiver.received.length;
    const event = { accountId, url: null, type: 'contacts.batch', data: { inserted: 1 } };
    for (const id of await emitEvent(t.ctx.db, t.clock, event))
      assert.equal(await runDeliveryJob(webhookDeliveryHandler(t.ctx), t.ctx.db, id), 'done');
    return receiver.received.slice(before);
  }

  const basic = (password: string) => `Basic ${Buffer.from(`hook:${password}`).toString('base64')}`;

  /**
   * A database as the code before migration 0044 left it: an account and its endpoint, each
   * keeping `clearUrl` as given, and `before` done with the first app first.
   */
  async function keptBefore0044(clearUrl: string, before: (t: TestApp, accountId: string) => Promise<void>) {
    const first = await start();
    const account = await first.createAccount();
    const made = await first.app.inject({
      method: 'POST',
      url: '/webhooks/endpoints',
      headers: bearer(await first.tokenFor(account)),
      payload: { url: receiver.url, events: ['contacts.batch'] },
    });
    assert.equal(made.statusCode, 201, made.body);
    await before(first, account.row.id);
    await first.close();
    await sql`update webhook_endpoints set url = ${clearUrl}`.execute(database.db);
    await sql`update accounts set inbound_sms_webhook_url = ${clearUrl}`.execute(database.db);
    // Migration 0044 as it found that database: it leaves the marker for the next start.
    await migrations['0044_url_passwords_to_seal'].up(database.db);
    return account.row.id;
  }

  it('seals at the next start the webhook URLs’ passwords kept in clear before migration 0044', async () => {
    const password = 'KeptBefore0044';
    const accountId = await keptBefore0044(receiver.url.replace('http://', `http://hook:${password}@`), async () => {});
    const t = await start();
    try {
      const runs = [...(await restingStrings(database))];
      assert.ok(!runs.some((run) => run.includes(password)), 'in clear in no file, free page or dump');
      const posts = await postedToEndpoints(t, accountId);
      assert.deepEqual(
        posts.map((post) => post.headers.authorization),
        [basic(password)],
      );
    } finally {
      await t.close();
    }
  });

  it('seals again at a later start what a process not yet upgraded wrote in clear, within the hour', async () => {
    const accountId = await keptBefore0044(
      receiver.url.replace('http://', 'http://hook:KeptBefore0044@'),
      async () => {},
    );
    await (await start()).close();
    // A process of the code before 0044, still serving during a rolling upgrade, saves a URL as given.
    const writtenLate = receiver.url.replace('http://', 'http://hook:WrittenLate@');
    await sql`update webhook_endpoints set url = ${writtenLate}`.execute(database.db);
    const marker = () =>
      database.db.selectFrom('settings').select('value').where('key', '=', 'url_passwords_to_seal').executeTakeFirst();
    const firstSealedAt = Number((await marker())?.value);
    assert.ok(Date.now() - firstSealedAt < 60_000, 'the first start wrote when it sealed');
    const t = await start();
    try {
      const runs = [...(await restingStrings(database))];
      assert.ok(!runs.some((run) => run.includes('WrittenLate')), 'in clear in no file, free page or dump');
      assert.deepEqual(
        (await postedToEndpoints(t, accountId)).map((post) => post.headers.authorization),
        [basic('WrittenLate')],
      );
    } finally {
      await t.close();
    }
    assert.equal(Number((await marker())?.value), firstSealedAt, 'kept for the starts within the hour');
    await sql`update settings set value = ${String(firstSealedAt - 3_600_000)}
              where key = 'url_passwords_to_seal'`.execute(database.db);
    // An hour on, a process still not replaced wrote one more: sealed, and the marker kept.
    await sql`update webhook_endpoints set url = ${writtenLate.replace('WrittenLate', 'WrittenLater')}`.execute(
      database.db,
    );
    await (await start()).close();
    const [endpoint] = await database.db.selectFrom('webhook_endpoints').select('url').execute();
    assert.ok(!endpoint.url.includes('WrittenLater'), endpoint.url);
    assert.notEqual(await marker(), undefined, 'kept: that start found one');
    await (await start()).close();
    assert.equal(await marker(), undefined, 'gone with the first start after the hour that finds none');
  });

  it('gathers a stream of events appended before migration 0044 into deliveries, the password sealed', async () => {
    const password = 'StreamBefore0044';
    const clearUrl = receiver.url.replace('http://', `http://hook:${password}@`);
    await keptBefore0044(clearUrl, async (first, accountId) => {
      const events = [{ queueId: randomUUID(), status: 'Delivered' }];
      const stream = { accountId, url: clearUrl, type: 'sms.status', events };
      await first.ctx.db.transaction().execute((trx) => appendWebhookEvents(trx, first.clock, stream));
    });
    const t = await start();
    try {
      const gatherer = new Worker({ database: t.ctx.database, clock: t.clock });
      gatherer.register(GATHER_KIND, webhookGatherHandler(t.ctx));
      t.clock.advance(GATHER_WINDOW_MS);
      assert.equal(await gatherer.drain(), 1, 'the stream’s gather ran');
      const delivery = await database.db
        .selectFrom('webhook_deliveries')
        .select(['id', 'url'])
        .where('type', '=', 'sms.status')
        .executeTakeFirstOrThrow();
      assert.ok(!delivery.url.includes(password), delivery.url);
      assert.equal(await runDeliveryJob(webhookDeliveryHandler(t.ctx), t.ctx.db, delivery.id), 'done');
      assert.equal(receiver.received.at(-1)?.headers.authorization, basic(password), 'its post carries it');
    } finally {
      await t.close();
    }
  });

  it('keeps a webhook URL’s form across a new ENCRYPTION_KEY, and its password with the old key gone', async () => {
    const password = 'Rotated0Pw';
    const url = receiver.url.replace('http://', `http://hook:${password}@`);
    const oldKey = encryptionKey;
    const first = await start(keyEnv(oldKey));
    const account = await first.createAccount();
    const token = await first.tokenFor(account);
    const request = {
      method: 'POST' as const,
      url: '/webhooks/endpoints',
      headers: { ...bearer(token), 'idempotency-key': 'endpoint-with-password' },
      payload: { url, events: ['contacts.batch'] },
    };
    const made = await first.app.inject(request);
    assert.equal(made.statusCode, 201, made.body);
    const kept = await database.db.selectFrom('webhook_endpoints').select('url').executeTakeFirstOrThrow();
    await first.close();

    const newKey = randomBytes(32).toString('hex');
    const both = await start({ ...keyEnv(newKey), ENCRYPTION_KEY_PREVIOUS: oldKey });
    try {
      const replayed = await both.app.inject(request);
      assert.equal(replayed.headers['idempotent-replayed'], 'true', replayed.body);
      assert.deepEqual(replayed.json(), made.json());
    } finally {
      await both.close();
    }

    const t = await start(keyEnv(newKey));
    try {
      const now = await database.db.selectFrom('webhook_endpoints').select('url').executeTakeFirstOrThrow();
      assert.equal(now.url, kept.url, 'the same form, so a send naming the URL before is still told from it');
      // An event of a send that named the same URL before the change: one post, to the endpoint.
      const event = { accountId: account.row.id, url: kept.url, type: 'contacts.batch', data: { inserted: 1 } };
      const ids = await emitEvent(t.ctx.db, t.clock, event);
      assert.equal(ids.length, 1);
      assert.equal(await runDeliveryJob(webhookDeliveryHandler(t.ctx), t.ctx.db, ids[0]), 'done');
      assert.deepEqual(
        receiver.received.map((post) => post.headers.authorization),
        [basic(password)],
      );
    } finally {
      await t.close();
    }
  });

  for (const jwt of [{}, { JWT_SECRET: 'j'.repeat(40) }] as Array<Record<string, string>>) {
    const with_ = 'JWT_SECRET' in jwt ? 'with JWT_SECRET set' : 'without JWT_SECRET';
    it(`keeps an endpoint URL’s password through a start under another ENCRYPTION_KEY, ${with_}`, async () => {
      const password = 'Kept0Pw';
      const url = receiver.url.replace('http://', `http://hook:${password}@`);
      const first = await start({ ...keyEnv(encryptionKey), ...jwt });
      const account = await first.createAccount();
      const made = await first.app.inject({
        method: 'POST',
        url: '/webhooks/endpoints',
        headers: bearer(await first.tokenFor(account)),
        payload: { url, events: ['contacts.batch'] },
      });
      assert.equal(made.statusCode, 201, made.body);
      const urlKey = () =>
        database.db
          .selectFrom('settings')
          .select('value')
          .where('key', '=', 'sealed_url_key')
          .executeTakeFirstOrThrow();
      const sealedKey = await urlKey();
      await first.close();

      await assert.rejects(
        start({ ...keyEnv(randomBytes(32).toString('hex')), ...jwt }),
        (error: unknown) => error instanceof ConfigError && /^invalid ENCRYPTION_KEY: /.test(error.message),
      );
      assert.deepEqual(await urlKey(), sealedKey, 'the key of URLs’ passwords left as it was');

      const t = await start({ ...keyEnv(encryptionKey), ...jwt });
      try {
        const kept = await database.db.selectFrom('webhook_endpoints').select('url').executeTakeFirstOrThrow();
        const event = { accountId: account.row.id, url: kept.url, type: 'contacts.batch', data: { inserted: 1 } };
        const [id] = await emitEvent(t.ctx.db, t.clock, event);
        assert.equal(await runDeliveryJob(webhookDeliveryHandler(t.ctx), t.ctx.db, id), 'done');
        assert.equal(receiver.received.at(-1)?.headers.authorization, basic(password));
      } finally {
        await t.close();
      }
    });
  }

  it('makes no key anew at a start under another ENCRYPTION_KEY, whatever depends on it', async () => {
    // No endpoint nor inbound URL has a password: only the key of access tokens stops this start.
    await (await start()).close();
    const keys = () =>
      database.db
        .selectFrom('settings')
        .select(['key', 'value'])
        .where('key', 'like', 'sealed_%')
        .orderBy('key')
        .execute();
    const before = await keys();
    await assert.rejects(
      start(keyEnv(randomBytes(32).toString('hex'))),
      (error: unknown) => error instanceof ConfigError && /key of access tokens/.test(error.message),
    );
    assert.deepEqual(await keys(), before, 'every sealed key left as it was');
  });

  it('herald rotate-jwt-secret ends every access token at the restart, and new ones work', async () => {
    const env = { DATABASE_URL: database.url, ENCRYPTION_KEY: encryptionKey };
    const first = await start();
    const account = await first.createAccount();
    const old = await first.tokenFor(account);
    await first.close();

    const refused = await herald(['rotate-jwt-secret'], { ...env, JWT_SECRET: 'x'.repeat(32) });
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /^herald: JWT_SECRET is set, and it is the key of access tokens/);
    if (dialect === 'postgres') {
      const keyless = await herald(['rotate-jwt-secret'], { ...env, ENCRYPTION_KEY: '' });
      assert.equal(keyless.code, 1);
      assert.match(keyless.stderr, /^herald: invalid ENCRYPTION_KEY: must be set on PostgreSQL/);
    }
    const rotated = await herald(['rotate-jwt-secret'], env);
    assert.equal(rotated.code, 0, rotated.stderr);
    assert.match(rotated.stdout, /Every access token issued before no longer works[\s\S]*Restart every herald serve/);

    const t = await start();
    try {
      assert.equal((await get(t, '/account', old)).statusCode, 401, 'the old token has ended');
      assert.equal((await get(t, '/account', await t.tokenFor(account))).statusCode, 200);
    } finally {
      await t.close();
    }
  });

  it('stops a start under another ENCRYPTION_KEY; a webhook secret of a lost key asks for a rotation', async () => {
    const first = await start();
    const account = await first.createAccount();
    const { secret } = (await get(first, '/webhooks/secret', await first.tokenFor(account))).json();
    await first.close();

    const otherKey = randomBytes(32).toString('hex');
    await assert.rejects(
      start(keyEnv(otherKey)),
      (error: unknown) =>
        error instanceof ConfigError && /^invalid ENCRYPTION_KEY: .*herald rotate-jwt-secret/.test(error.message),
    );
    const otherEnv = { DATABASE_URL: database.url, ENCRYPTION_KEY: otherKey };
    // Without --key-lost the command takes only the key serve runs with: it seals nothing here.
    const refused = await herald(['rotate-jwt-secret'], otherEnv);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /^herald: ENCRYPTION_KEY does not open this database's secrets/);
    await assert.rejects(start(keyEnv(otherKey)), /herald rotate-jwt-secret --key-lost/);
    const recovered = await herald(['rotate-jwt-secret', '--key-lost'], otherEnv);
    assert.equal(recovered.code, 0, recovered.stderr);

    const t = await start(keyEnv(otherKey));
    try {
      const token = await t.tokenFor(account);
      const lost = await get(t, '/webhooks/secret', token);
      assert.equal(lost.statusCode, 409, lost.body);
      assert.match(lost.json().message, /rotate it \(POST \/webhooks\/secret\/rotate\)/);
      const rotation = await t.app.inject({ method: 'POST', url: '/webhooks/secret/rotate', headers: bearer(token) });
      assert.equal(rotation.statusCode, 200, rotation.body);
      const next = rotation.json().secret;
      assert.notEqual(next, secret);
      assert.equal((await get(t, '/webhooks/secret', token)).json().secret, next);
      assertSignedBy(await postedWebhook(t, account.row.id), [next]);
      // Verify's key, sealed under the lost key with no code pending, was made anew.
      const started = await t.app.inject({
        method: 'POST',
        url: '/verify',
        headers: bearer(token),
        payload: { to: '919812345678' },
      });
      assert.equal(started.statusCode, 201, started.body);
    } finally {
      await t.close();
    }
  });

  it('stops a start under another ENCRYPTION_KEY with JWT_SECRET set while a code is pending', async () => {
    const jwt = { JWT_SECRET: 'j'.repeat(40) };
    const first = await start({ ...keyEnv(encryptionKey), ...jwt });
    const account = await first.createAccount();
    const started = await first.app.inject({
      method: 'POST',
      url: '/verify',
      headers: bearer(await first.tokenFor(account)),
      payload: { to: '919812345678' },
    });
    assert.equal(started.statusCode, 201, started.body);
    await first.close();
    await assert.rejects(
      start({ ...keyEnv(randomBytes(32).toString('hex')), ...jwt }),
      (error: unknown) => error instanceof ConfigError && /^invalid ENCRYPTION_KEY: .*Verify/.test(error.message),
    );
  });
});
