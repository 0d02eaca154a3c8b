import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, it } from 'node:test';
import { sql } from 'kysely';
import { forEachDatabase, createTestDatabase, POSTGRES_ADMIN_URL, type TestDatabase } from '../support/databases.ts';
import { freePort, herald, onTerminal, serveKeyEnv, start } from './support.ts';
import { verifyPassword } from '../../src/auth/passwords.ts';
import { prepareErasureKey } from '../../src/messaging/erased-identifiers.ts';
import { keyFromHex, Keyring } from '../../src/sealed.ts';
import { sendReport } from '../../src/sim/smtp-reports.ts';

it('stops at start with one line naming a bad variable', async () => {
  const result = await herald(['migrate'], { PORT: 'eighty' });
  assert.equal(result.code, 1);
  assert.equal(result.stderr, 'herald: invalid PORT: must be a whole number from 0 to 65535, got "eighty"\n');
});

it('stops with one line naming HOST and PORT when the port is taken, having connected to no SMSC', async () => {
  const taken = createServer().listen(0, '127.0.0.1');
  await once(taken, 'listening');
  const { port } = taken.address() as { port: number };
  // Where SMS_TRANSPORT points: it counts the connections made to it.
  let connections = 0;
  const smsc = createServer((socket) => {
    connections += 1;
    socket.destroy();
  }).listen(0, '127.0.0.1');
  await once(smsc, 'listening');
  try {
    const database = await createTestDatabase('sqlite');
    try {
      const result = await herald(['serve'], {
        DATABASE_URL: database.url,
        HOST: '127.0.0.1',
        PORT: String(port),
        SMS_TRANSPORT: `smpp://herald:secret@127.0.0.1:${(smsc.address() as { port: number }).port}`,
      });
      assert.equal(result.code, 1);
      const advice = 'set PORT or HOST to another value';
      assert.equal(
        result.stderr,
        `herald: cannot listen on HOST 127.0.0.1 PORT ${port}: it is already in use (EADDRINUSE); ${advice}\n`,
      );
      // A supervisor starting it again and again would otherwise take and drop the operator's binds.
      assert.equal(connections, 0);
    } finally {
      await database.close();
    }
  } finally {
    taken.close();
    smsc.close();
  }
});

it('stops with one line when HOST is no name or the database cannot be reached', async () => {
  const database = await createTestDatabase('sqlite');
  try {
    const unnamed = await herald(['serve'], { DATABASE_URL: database.url, HOST: 'no-such-host.invalid', PORT: '0' });
    assert.equal(unnamed.code, 1);
    assert.match(unnamed.stderr, /^herald: cannot listen on HOST no-such-host\.invalid PORT 0: it is not a name this/);
    assert.equal(unnamed.stderr.split('\n').length, 2, unnamed.stderr);
  } finally {
    await database.close();
  }
  // A port no PostgreSQL listens on.
  const closed = createServer().listen(0, '127.0.0.1');
  await once(closed, 'listening');
  const { port } = closed.address() as { port: number };
  closed.close();
  for (const command of [['serve'], ['migrate']]) {
    const unreachable = await herald(command, {
      DATABASE_URL: `postgres://herald:S3cret@127.0.0.1:${port}/herald`,
      ENCRYPTION_KEY: 'ab'.repeat(32),
    });
    assert.equal(unreachable.code, 1);
    assert.match(unreachable.stderr, /^herald: cannot use the database of DATABASE_URL: .*ECONNREFUSED/);
    assert.equal(unreachable.stderr.split('\n').length, 2, unreachable.stderr);
    assert.doesNotMatch(unreachable.stderr, /S3cret/);
  }
});

it('prints the usage of every command and group on --help, whatever the environment holds', async () => {
  const everything = await herald(['--help'], {});
  assert.equal(everything.code, 0);
  const commands = [
    ['serve'],
    ['migrate'],
    ['rotate-jwt-secret'],
    ['account'],
    ['account', 'create'],
    ['account', 'set-password'],
    ['account', 'list'],
    ['dkim'],
    ['dkim', 'rotate'],
    ['smsc'],
    ['smsc', 'add'],
    ['routes', 'set'],
  ];
  for (const command of commands) {
    // A bad variable too: help reads no configuration, so it cannot fail on one.
    const result = await herald([...command, '--help'], { PORT: 'eighty' });
    assert.equal(result.code, 0, `${command.join(' ')}: ${result.stderr}`);
    assert.equal(result.stderr, '');
    const [first] = result.stdout.split('\n');
    assert.ok(first.startsWith(`usage: herald ${command.join(' ')}`), first);
    // One source: a command's own usage line is the line the full usage gives it.
    if (command.length === 2)
      assert.ok(everything.stdout.includes(`  ${first.slice('usage: herald '.length)}\n`), first);
  }
  const passwordHelp = (await herald(['account', 'set-password', '-h'], {})).stdout;
  assert.match(passwordHelp, /--password-stdin/);
  assert.match(passwordHelp, /--password PW[\s\S]*lands in the shell's history/);
  const rotateHelp = (await herald(['rotate-jwt-secret', '--help'], {})).stdout;
  assert.match(rotateHelp, /Every\saccess token issued before stops working[\s\S]*restart every serve process/);
});

forEachDatabase((dialect) => {
  let database: TestDatabase;
  beforeEach(async () => {
    database = await createTestDatabase(dialect);
  });
  afterEach(() => database.close());

  it('creates, lists and changes accounts from the command line', async () => {
    const env = { DATABASE_URL: database.url };
    const created = await herald(
      ['account', 'create', '--user', 'ada@example.com', '--password', 'correct horse battery staple'],
      env,
    );
    assert.equal(created.code, 0, created.stderr);
    const account = JSON.parse(created.stdout);
    assert.equal(account.userName, 'ada@example.com');

    const duplicate = await herald(
      ['account', 'create', '--user', 'ADA@example.com', '--password', 'correct horse battery staple'],
      env,
    );
    assert.equal(duplicate.code, 1);
    assert.match(duplicate.stderr, /^herald: An account with the user name ADA@example.com already exists\.\n$/);

    const rotated = JSON.parse(
      (await herald(['account', 'rotate-private-token', '--user', 'ada@example.com'], env)).stdout,
    );
    assert.notEqual(rotated.privateToken, account.privateToken);

    const limited = JSON.parse(
      (
        await herald(
          ['account', 'set-rate-limit', '--user', 'ada@example.com', '--group', 'sms', '--per-minute', '50'],
          env,
        )
      ).stdout,
    );
    assert.equal(limited.rateLimits.sms, 50);

    const shortener = await herald(
      ['account', 'add-shortener-domain', '--user', 'ada@example.com', '--domain', 'Go.Example.com'],
      env,
    );
    assert.equal(shortener.code, 0, shortener.stderr);
    assert.equal(JSON.parse(shortener.stdout).domain, 'go.example.com');
    const ownHost = await herald(
      ['account', 'add-shortener-domain', '--user', 'ada@example.com', '--domain', 'herald.example.com'],
      { ...env, PUBLIC_URL: 'https://herald.example.com' },
    );
    assert.equal(ownHost.code, 1);
    assert.equal(
      ownHost.stderr,
      "herald: The service's own host cannot be a shortener domain.\n" +
        "  domain: is the service's own host (PUBLIC_URL); its links are at /l/<code> already\n",
      'the message, then each field at fault',
    );

    const listed = JSON.parse((await herald(['account', 'list'], env)).stdout);
    assert.deepEqual(
      listed.map((a: { userName: string }) => a.userName),
      ['ada@example.com'],
    );

    const unknownUser = await herald(['account', 'delete', '--user', 'nobody@example.com'], env);
    assert.equal(unknownUser.code, 1);
    assert.equal(unknownUser.stderr, 'herald: no account with the user name nobody@example.com\n');

    const missing = await herald(['account', 'set-rate-limit', '--user', 'ada@example.com', '--group', 'sms'], env);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /^herald: --per-minute is required\n\nusage: herald account set-rate-limit /);
  });

  it(
    'authorises a sender domain and prints its DKIM record, shows, rotates, lists and removes DKIM keys from the ' +
      'command line',
    async () => {
      const env = { DATABASE_URL: database.url, ...serveKeyEnv(dialect) };
      await herald(
        ['account', 'create', '--user', 'ada@example.com', '--password', 'correct horse battery staple'],
        env,
      );
      const added = await herald(
        ['account', 'add-sender-domain', '--user', 'ada@example.com', '--domain', 'Shop.Example'],
        env,
      );
      assert.equal(added.code, 0, added.stderr);
      const domain = JSON.parse(added.stdout);
      assert.deepEqual(Object.keys(domain).sort(), ['dkim', 'domain']);
      assert.equal(domain.domain, 'shop.example');
      assert.equal(domain.dkim.recordName, `${domain.dkim.selector}._domainkey.shop.example`);
      assert.match(domain.dkim.recordValue, /^v=DKIM1; k=rsa; p=[A-Za-z0-9+/]{300,}={0,2}$/);

      const ada = ['--user', 'ada@example.com', '--domain', 'shop.example'];
      assert.deepEqual(JSON.parse((await herald(['dkim', 'show', ...ada], env)).stdout), domain);
      const rotated = JSON.parse((await herald(['dkim', 'rotate', ...ada], env)).stdout);
      assert.notEqual(rotated.dkim.selector, domain.dkim.selector);
      const keys = JSON.parse((await herald(['dkim', 'keys', ...ada], env)).stdout);
      assert.deepEqual(
        keys.keys.map((k: { selector: string; active: boolean }) => [k.selector, k.active]),
        [
          [rotated.dkim.selector, true],
          [domain.dkim.selector, false],
        ],
      );
      const active = await herald(['dkim', 'remove-key', '--selector', rotated.dkim.selector, ...ada], env);
      assert.equal(active.code, 1);
      assert.match(
        active.stderr,
        /^herald: The DKIM key herald-\S+ signs shop\.example's mail: rotate to a new key first/,
      );
      assert.equal((await herald(['dkim', 'remove-key', '--selector', domain.dkim.selector, ...ada], env)).code, 0);

      const service = JSON.parse((await herald(['dkim', 'show'], env)).stdout);
      assert.equal(service.domain, 'mail.localhost');
      assert.equal(service.dkim.recordName, `${service.dkim.selector}._domainkey.mail.localhost`);

      const half = await herald(['dkim', 'show', '--user', 'ada@example.com'], env);
      assert.equal(half.code, 1);
      assert.match(half.stderr, /^herald: --user and --domain go together/);
    },
  );

  it('refuses to seal a secret under a key serve does not run with, and makes no key file for it', async () => {
    const key = randomBytes(32).toString('hex');
    const env = { DATABASE_URL: database.url, ENCRYPTION_KEY: key };
    // What serve's start makes under its key (server/stored-secrets.ts): the erased identifiers' key.
    await prepareErasureKey(database.db, new Keyring(keyFromHex(key)!));
    const service = await herald(['dkim', 'rotate'], env);
    assert.equal(service.code, 0, service.stderr);
    const other = await herald(['dkim', 'rotate'], { ...env, ENCRYPTION_KEY: randomBytes(32).toString('hex') });
    assert.equal(other.code, 1);
    assert.match(other.stderr, /^herald: ENCRYPTION_KEY does not open this database's secrets: give the command /);
    if (dialect === 'sqlite') {
      const without = await herald(['dkim', 'show'], { DATABASE_URL: database.url });
      assert.equal(without.code, 1);
      assert.match(without.stderr, /^herald: this database's secrets are sealed under a key that is not here/);
      const path = new URL(database.url.replace(/^sqlite:/, 'file:')).pathname;
      assert.equal(existsSync(`${path}.key`), false, 'no stray key file beside the database');
    }
    assert.equal((await herald(['dkim', 'show'], env)).code, 0, 'the key serve runs with still opens them');
  });

  it('adds, lists and removes SMSC connections, sets and lists the routing table, from the command line', async () => {
    const env = { DATABASE_URL: database.url, ...serveKeyEnv(dialect) };
    const url = 'smpp://herald:s3cret@127.0.0.1:2776?binds=1';
    const misnamed = await herald(['smsc', 'add', '--name', 'EU west', '--url', url], env);
    assert.equal(misnamed.code, 1);
    assert.match(misnamed.stderr, /^herald: The connection name is not valid\.\n {2}name: must be 1 to 32 lower-case/);
    const added = await herald(['smsc', 'add', '--name', 'eu', '--url-stdin'], env, `${url}\n`);
    assert.equal(added.code, 0, added.stderr);
    assert.deepEqual(JSON.parse(added.stdout), { name: 'eu', url: 'smpp://herald:***@127.0.0.1:2776?binds=1' });
    const listed = JSON.parse((await herald(['smsc', 'list'], env)).stdout);
    assert.deepEqual(
      listed.smsc.map((c: { name: string; state: string }) => [c.name, c.state]),
      [
        ['default', 'sandbox'],
        ['eu', 'down'],
      ],
    );

    const dir = mkdtempSync(join(tmpdir(), 'herald-routes-'));
    try {
      const file = join(dir, 'routes.json');
      const routes = [{ prefix: '49', smsc: ['eu', 'default'], pricePerPart: '0.05', currency: 'EUR' }];
      writeFileSync(file, JSON.stringify({ routes }));
      const set = await herald(['routes', 'set', '--file', file], env);
      assert.equal(set.code, 0, set.stderr);
      assert.deepEqual(JSON.parse(set.stdout), { routes });
      assert.deepEqual(JSON.parse((await herald(['routes', 'list'], env)).stdout), { routes });

      writeFileSync(file, JSON.stringify([{ prefix: '+49', smsc: ['eu'] }]));
      const malformed = await herald(['routes', 'set', '--file', file], env);
      assert.equal(malformed.code, 1);
      assert.match(malformed.stderr, /^herald: the routes file is not a routing table:\n {2}routes\[0\]\.prefix: /);
      writeFileSync(file, JSON.stringify([{ prefix: '44', smsc: ['nowhere'] }]));
      const unknown = await herald(['routes', 'set', '--file', file], env);
      assert.equal(unknown.code, 1);
      assert.match(unknown.stderr, /\n {2}routes\[0\]\.smsc\[0\]: no connection is named "nowhere"\n$/);
      assert.deepEqual(JSON.parse((await herald(['routes', 'list'], env)).stdout), { routes }, 'unchanged');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }

    const named = await herald(['smsc', 'remove', '--name', 'eu'], env);
    assert.equal(named.code, 1);
    assert.match(named.stderr, /^herald: The connection "eu" is named by 1 route/);
    const emptyTable = join(tmpdir(), `herald-routes-${process.pid}.json`);
    writeFileSync(emptyTable, '{"routes": []}');
    try {
      assert.equal((await herald(['routes', 'set', '--file', emptyTable], env)).code, 0);
    } finally {
      rmSync(emptyTable, { force: true });
    }
    const removed = await herald(['smsc', 'remove', '--name', 'eu'], env);
    assert.equal(removed.code, 0, removed.stderr);
    assert.deepEqual(JSON.parse(removed.stdout), { removed: 'eu' });
  });

  // The commands that only read: run on a database that is not there, or not migrated, they make nothing.
  const readers = [
    ['account', 'list'],
    ['dkim', 'show'],
    ['dkim', 'keys'],
    ['smsc', 'list'],
    ['routes', 'list'],
  ];

  it('reads no database into being: the commands that only read stop on one that does not exist', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'herald-cli-'));
    try {
      const file = join(dir, 'data', 'herald.db');
      const missing =
        dialect === 'sqlite'
          ? { url: `sqlite:${file}`, says: `the database ${file} does not exist` }
          : { url: POSTGRES_ADMIN_URL.replace(/\/[^/]*$/, '/herald_never_made'), says: 'the database of DATABASE_URL' };
      for (const command of readers) {
        const read = await herald(command, { DATABASE_URL: missing.url, ...serveKeyEnv(dialect) });
        assert.equal(read.code, 1, command.join(' '));
        assert.equal(read.stdout, '');
        assert.ok(read.stderr.startsWith(`herald: ${missing.says}`), read.stderr);
        assert.match(read.stderr, /herald migrate/);
      }
      assert.deepEqual(readdirSync(dir), [], 'no directory, database or key file was made');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('migrates no database to read it: the commands that only read stop on one not migrated', async () => {
    const empty = await createTestDatabase(dialect, { empty: true });
    try {
      await sql`select 1`.execute(empty.db); // SQLite's file is made when it is first opened
      for (const command of readers) {
        const read = await herald(command, { DATABASE_URL: empty.url, ...serveKeyEnv(dialect) });
        assert.equal(read.code, 1, command.join(' '));
        assert.match(read.stderr, /^herald: the database .* is not migrated \(\d+ migrations to run, from 0001_/);
        assert.match(read.stderr, /: run herald migrate first\n$/);
      }
      const tables = await (dialect === 'sqlite'
        ? sql<{ name: string }>`select name from sqlite_master where type = 'table'`
        : sql<{ name: string }>`select table_name as name from information_schema.tables where table_schema = 'public'`
      ).execute(empty.db);
      assert.deepEqual(tables.rows, [], 'not even the migrations table');
      if (dialect === 'sqlite') assert.ok(!existsSync(`${empty.url.slice('sqlite:'.length)}.key`), 'no key file');
    } finally {
      await empty.close();
    }
  });

  const storedHash = async (userName: string) =>
    (
      await database.db
        .selectFrom('accounts')
        .select('password_hash')
        .where('user_name', '=', userName)
        .executeTakeFirstOrThrow()
    ).password_hash;

  it('takes a new password from stdin with --password-stdin, and refuses in one line when none is given', async () => {
    const env = { DATABASE_URL: database.url };
    const created = await herald(
      ['account', 'create', '--user', 'ada@example.com', '--password-stdin'],
      env,
      'correct horse battery staple\n',
    );
    assert.equal(created.code, 0, created.stderr);
    assert.equal(
      await verifyPassword('correct horse battery staple', await storedHash('ada@example.com')),
      true,
      'without its trailing newline',
    );

    const changed = await herald(
      ['account', 'set-password', '--user', 'ada@example.com', '--password-stdin'],
      env,
      'battery staple correct horse',
    );
    assert.equal(changed.code, 0, changed.stderr);
    assert.equal(await verifyPassword('battery staple correct horse', await storedHash('ada@example.com')), true);

    for (const action of ['create', 'set-password']) {
      // stdin is a pipe here, not a terminal: nobody to ask.
      const none = await herald(
        ['account', action, '--user', 'ada@example.com'],
        env,
        'correct horse battery staple\n',
      );
      assert.equal(none.code, 1);
      assert.equal(
        none.stderr,
        'herald: no password given: pipe it in with --password-stdin, or run the command in a terminal to be ' +
          'asked for it\n',
      );
    }
    assert.equal(
      await verifyPassword('battery staple correct horse', await storedHash('ada@example.com')),
      true,
      'unchanged',
    );
  });

  it('asks for a new password twice on a terminal without showing it', async () => {
    const env = { DATABASE_URL: database.url };
    const create = onTerminal(['account', 'create', '--user', 'ada@example.com'], env);
    await create.shows('Password:');
    create.type('correct horse battery staple');
    await create.shows('Password again:');
    create.type('correct horse battery staple');
    assert.equal(await create.exit, 0, create.screen());
    assert.match(create.screen(), /"userName": "ada@example.com"/);
    assert.doesNotMatch(create.screen(), /correct horse/);
    assert.equal(await verifyPassword('correct horse battery staple', await storedHash('ada@example.com')), true);

    const typo = onTerminal(['account', 'set-password', '--user', 'ada@example.com'], env);
    await typo.shows('Password:');
    typo.type('battery staple correct horse');
    await typo.shows('Password again:');
    typo.type('battery staple correct hrose');
    assert.equal(await typo.exit, 1);
    assert.match(typo.screen(), /herald: the two passwords differ; nothing was changed\r\n$/);
    assert.doesNotMatch(typo.screen(), /battery staple/);
    assert.equal(
      await verifyPassword('correct horse battery staple', await storedHash('ada@example.com')),
      true,
      'unchanged',
    );
  });

  it('runs API and workers as separate roles on PostgreSQL only', async () => {
    const env = { DATABASE_URL: database.url, PORT: String(await freePort()), ...serveKeyEnv(dialect) };
    const unknown = await herald(['serve', '--role', 'mailer'], env);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /^herald: --role must be one of all, api, worker\n/);
    if (dialect === 'sqlite') {
      const split = await herald(['serve', '--role', 'worker'], env);
      assert.equal(split.code, 1);
      assert.match(
        split.stderr,
        /^herald: invalid --role: api and worker run as separate processes on PostgreSQL only/,
      );
      return;
    }
    const workerPort = await freePort();
    const worker = await start(['serve', '--role', 'worker'], { ...env, WORKER_PORT: String(workerPort) });
    try {
      assert.match(worker.output(), /"role":"worker"/);
      await assert.rejects(fetch(`http://127.0.0.1:${env.PORT}/healthz`), 'a worker process does not serve the API');
      const get = (path: string) => fetch(`http://127.0.0.1:${workerPort}${path}`);
      assert.deepEqual(await (await get('/healthz')).json(), { status: 'ok' });
      assert.deepEqual(await (await get('/readyz')).json(), { status: 'ready' });
      const metrics = await get('/metrics');
      assert.equal(metrics.status, 200);
      const text = await metrics.text();
      assert.match(text, /^process_cpu_seconds_total /m, 'the process metrics');
      assert.match(text, /^# TYPE herald_queue_jobs gauge/m, 'the queue metrics');
      worker.child.kill('SIGTERM');
      const [code] = await once(worker.child, 'exit');
      assert.equal(code, 0);
    } finally {
      worker.child.kill('SIGKILL');
    }
  });

  it(
    'runs the inbound SMTP listener beside the API when INBOUND_SMTP_PORT is set, not in a worker process, and ' +
      'closes it on SIGTERM',
    async () => {
      const smtpPort = await freePort();
      const env = {
        DATABASE_URL: database.url,
        PORT: String(await freePort()),
        INBOUND_SMTP_PORT: String(smtpPort),
        BOUNCE_DOMAIN: 'bounce.example',
        ...serveKeyEnv(dialect),
      };
      const refusedAtRcpt = (error: { responseCode?: number }) => error.responseCode === 550;
      const hello = () =>
        sendReport(
          '127.0.0.1',
          smtpPort,
          { from: '', to: 'someone@elsewhere.example' },
          Buffer.from('Subject: hi\r\n\r\nhi\r\n'),
        );
      const api = await start(['serve', ...(dialect === 'postgres' ? ['--role', 'api'] : [])], env);
      try {
        assert.match(api.output(), new RegExp(`"inboundSmtpPort":${smtpPort}`));
        await assert.rejects(hello(), refusedAtRcpt, 'the listener answers, and refuses an address it does not serve');
        api.child.kill('SIGTERM');
        const [code] = await once(api.child, 'exit');
        assert.equal(code, 0);
        await assert.rejects(hello(), /ECONNREFUSED/);
      } finally {
        api.child.kill('SIGKILL');
      }
      if (dialect === 'sqlite') return;
      const worker = await start(['serve', '--role', 'worker'], { ...env, WORKER_PORT: String(await freePort()) });
      try {
        assert.doesNotMatch(worker.output(), /inboundSmtpPort/);
        await assert.rejects(hello(), /ECONNREFUSED/);
      } finally {
        worker.child.kill('SIGKILL');
      }
    },
  );

  it('serves, and on SIGTERM finishes the request in flight before it exits', async () => {
    const port = await freePort();
    const env = { DATABASE_URL: database.url, PORT: String(port), ...serveKeyEnv(dialect) };
    const created = JSON.parse(
      (
        await herald(
          ['account', 'create', '--user', 'ada@example.com', '--password', 'correct horse battery staple'],
          env,
        )
      ).stdout,
    );
    const { child: server, output, logged } = await start(['serve'], env);
    try {
      // POST /token spends ~30 ms in argon2id: SIGTERM lands while it is in flight.
      const inFlight = fetch(`http://127.0.0.1:${port}/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          userName: 'ada@example.com',
          password: 'correct horse battery staple',
          privateToken: created.privateToken,
          validity: 'ShortLive',
        }),
      });
      await logged('incoming request');
      server.kill('SIGTERM');
      const response = await inFlight;
      assert.equal(response.status, 200);
      assert.equal((await response.json()).expires_in, 30);
      const [code] = await once(server, 'exit');
      assert.equal(code, 0);
      assert.match(output(), /shutting down/);
    } finally {
      server.kill('SIGKILL');
    }
  });
});
