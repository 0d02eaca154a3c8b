import assert from 'node:assert/strict';
import { once } from 'node:events';
import { afterEach, beforeEach, it } from 'node:test';
import { createTestDatabase, type TestDatabase } from '../support/databases.ts';
import { freePort, herald, start } from './support.ts';

// SQLite only: the lock is how one SQLite database keeps to one serve; PostgreSQL takes many.
let database: TestDatabase;
let file: string;
beforeEach(async () => {
  database = await createTestDatabase('sqlite');
  file = database.url.slice('sqlite:'.length);
});
afterEach(() => database.close());

const serveEnv = async () => ({ DATABASE_URL: database.url, PORT: String(await freePort()) });

it('refuses a second serve on the same SQLite database with one line', async () => {
  const first = await start(['serve'], await serveEnv());
  try {
    const second = await herald(['serve'], await serveEnv());
    assert.equal(second.code, 1);
    assert.equal(
      second.stderr,
      `herald: another herald serve holds the SQLite database ${file} (its lock is ` +
        `on ${file}-serve.lock); stop that one first, or set DATABASE_URL to another database\n`,
    );
    first.child.kill('SIGTERM');
    const [code] = await once(first.child, 'exit');
    assert.equal(code, 0);
    // Released on shutdown.
    const after = await start(['serve'], await serveEnv());
    after.child.kill('SIGTERM');
    await once(after.child, 'exit');
  } finally {
    first.child.kill('SIGKILL');
  }
});

it('starts a serve after the one before it was killed with SIGKILL', async () => {
  const killed = await start(['serve'], await serveEnv());
  killed.child.kill('SIGKILL');
  await once(killed.child, 'exit');
  const next = await start(['serve'], await serveEnv());
  try {
    next.child.kill('SIGTERM');
    const [code] = await once(next.child, 'exit');
    assert.equal(code, 0);
  } finally {
    next.child.kill('SIGKILL');
  }
});

it('runs account commands and migrate beside a running serve', async () => {
  const env = await serveEnv();
  const server = await start(['serve'], env);
  try {
    const created = await herald(
      ['account', 'create', '--user', 'ada@example.com', '--password', 'correct horse battery staple'],
      env,
    );
    assert.equal(created.code, 0, created.stderr);
    assert.equal(JSON.parse(created.stdout).userName, 'ada@example.com');
    const migrated = await herald(['migrate'], env);
    assert.equal(migrated.code, 0, migrated.stderr);
    assert.equal(migrated.stdout, 'the database is up to date\n');
    // The serve sees the account the command made: they share the database, not a copy.
    const token = await fetch(`http://127.0.0.1:${env.PORT}/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        userName: 'ada@example.com',
        password: 'correct horse battery staple',
        privateToken: JSON.parse(created.stdout).privateToken,
        validity: 'ShortLive',
      }),
    });
    assert.equal(token.status, 200);
  } finally {
    server.child.kill('SIGKILL');
  }
});
