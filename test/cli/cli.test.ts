import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { once } from 'node:events';
import { afterEach, beforeEach, it } from 'node:test';
import { forEachDatabase, createTestDatabase, type TestDatabase } from '../support/databases.ts';
import { freePort, herald, start } from './support.ts';

it('stops at start with one line naming a bad variable', async () => {
  const result = await herald(['migrate'], { PORT: 'eighty' });
  assert.equal(result.code, 1);
  assert.equal(result.stderr, 'herald: invalid PORT: must be a whole number from 0 to 65535, got "eighty"\n');
});

it('stops with one line naming HOST and PORT when the port is taken', async () => {
  const taken = createServer().listen(0, '127.0.0.1');
  await once(taken, 'listening');
  const { port } = taken.address() as { port: number };
  try {
    const database = await createTestDatabase('sqlite');
    try {
      const result = await herald(['serve'], { DATABASE_URL: database.url, HOST: '127.0.0.1', PORT: String(port) });
      assert.equal(result.code, 1);
      assert.equal(result.stderr, `herald: cannot listen on HOST 127.0.0.1 PORT ${port}: it is already in use (EADDRINUSE); set PORT or HOST to another value\n`);
    } finally {
      await database.close();
    }
  } finally {
    taken.close();
  }
});

forEachDatabase((dialect) => {
  let database: TestDatabase;
  beforeEach(async () => {
    database = await createTestDatabase(dialect);
  });
  afterEach(() => database.close());

  it('creates, lists and changes accounts from the command line', async () => {
    const env = { DATABASE_URL: database.url };
    const created = await herald(['account', 'create', '--user', 'ada@example.com', '--password', 'correct horse battery staple'], env);
    assert.equal(created.code, 0, created.stderr);
    const account = JSON.parse(created.stdout);
    assert.equal(account.userName, 'ada@example.com');

    const duplicate = await herald(['account', 'create', '--user', 'ADA@example.com', '--password', 'correct horse battery staple'], env);
    assert.equal(duplicate.code, 1);
    assert.match(duplicate.stderr, /^herald: An account with the user name ADA@example.com already exists\.\n$/);

    const rotated = JSON.parse((await herald(['account', 'rotate-private-token', '--user', 'ada@example.com'], env)).stdout);
    assert.notEqual(rotated.privateToken, account.privateToken);

    const limited = JSON.parse((await herald(['account', 'set-rate-limit', '--user', 'ada@example.com', '--group', 'sms', '--per-minute', '50'], env)).stdout);
    assert.equal(limited.rateLimits.sms, 50);

    const listed = JSON.parse((await herald(['account', 'list'], env)).stdout);
    assert.deepEqual(listed.map((a: { userName: string }) => a.userName), ['ada@example.com']);

    const unknownUser = await herald(['account', 'delete', '--user', 'nobody@example.com'], env);
    assert.equal(unknownUser.code, 1);
    assert.equal(unknownUser.stderr, 'herald: no account with the user name nobody@example.com\n');

    const missing = await herald(['account', 'set-password', '--user', 'ada@example.com'], env);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /--password is required/);
  });

  it('runs API and workers as separate roles on PostgreSQL only', async () => {
    const env = { DATABASE_URL: database.url, PORT: String(await freePort()) };
    const unknown = await herald(['serve', '--role', 'mailer'], env);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /^herald: --role must be one of all, api, worker\n/);
    if (dialect === 'sqlite') {
      const split = await herald(['serve', '--role', 'worker'], env);
      assert.equal(split.code, 1);
      assert.match(split.stderr, /^herald: invalid --role: api and worker run as separate processes on PostgreSQL only/);
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

  it('serves, and on SIGTERM finishes the request in flight before it exits', async () => {
    const port = await freePort();
    const env = { DATABASE_URL: database.url, PORT: String(port) };
    const created = JSON.parse((await herald(['account', 'create', '--user', 'ada@example.com', '--password', 'correct horse battery staple'], env)).stdout);
    const { child: server, output, logged } = await start(['serve'], env);
    try {
      // POST /token spends ~30 ms in argon2id: SIGTERM lands while it is in flight.
      const inFlight = fetch(`http://127.0.0.1:${port}/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ userName: 'ada@example.com', password: 'correct horse battery staple', privateToken: created.privateToken, validity: 'ShortLive' }),
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
