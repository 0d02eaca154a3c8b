import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, it } from 'node:test';
import { promisify } from 'node:util';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { loadEncryptionKey } from '../../src/messaging/encryption-key.ts';
import { closeContext, createContext } from '../../src/server/server.ts';
import { herald } from '../cli/support.ts';
import { createTestDatabase } from '../support/databases.ts';

const hexOf = (key: { export(): Buffer }) => key.export().toString('hex');

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'herald-key-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

it('on SQLite without ENCRYPTION_KEY, makes a key once beside the database (mode 0600), never in it', async () => {
  const file = join(dir, 'data', 'herald.db');
  const ctx = await createContext(loadConfig({ DATABASE_URL: `sqlite:${file}` }));
  const hex = hexOf(ctx.encryptionKey.current);
  await closeContext(ctx);
  assert.equal(readFileSync(`${file}.key`, 'utf8'), `${hex}\n`);
  assert.equal(statSync(`${file}.key`).mode & 0o777, 0o600);
  const again = await createContext(loadConfig({ DATABASE_URL: `sqlite:${file}` }));
  assert.equal(hexOf(again.encryptionKey.current), hex, 'the same key on the next start');
  // The database, its WAL and shared memory too: they hold people's numbers and addresses.
  for (const name of readdirSync(join(dir, 'data'))) {
    assert.equal(statSync(join(dir, 'data', name)).mode & 0o777, 0o600, name);
  }
  await closeContext(again);
  for (const name of readdirSync(join(dir, 'data')).filter((name) => !name.endsWith('.key'))) {
    const bytes = readFileSync(join(dir, 'data', name));
    assert.ok(!bytes.includes(Buffer.from(hex)) && !bytes.includes(Buffer.from(hex, 'hex')), `${name} holds no key`);
  }
});

it('gives processes that start at once on a new database one key, and leaves only the key file', async () => {
  const url = `sqlite:${join(dir, 'herald.db')}`;
  const module = JSON.stringify(new URL('../../src/messaging/encryption-key.ts', import.meta.url).href);
  const script = `import { loadEncryptionKey } from ${module};
process.stdout.write(loadEncryptionKey(process.argv[1], undefined).current.export().toString('hex'));`;
  const run = () => promisify(execFile)(process.execPath, ['--input-type=module', '-e', script, url]);
  const keys = (await Promise.all(Array.from({ length: 4 }, run))).map((result) => result.stdout);
  assert.equal(new Set(keys).size, 1, keys.join(' '));
  assert.match(keys[0], /^[0-9a-f]{64}$/);
  assert.deepEqual(readdirSync(dir), ['herald.db.key']);
});

it('takes ENCRYPTION_KEY when set, on SQLite too, and writes no file', () => {
  const hex = 'ab'.repeat(32);
  const key = loadEncryptionKey(`sqlite:${join(dir, 'herald.db')}`, loadConfig({ ENCRYPTION_KEY: hex }).encryptionKey);
  assert.equal(hexOf(key.current), hex);
  assert.deepEqual(readdirSync(dir), []);
});

it('stops on a key file that holds no key, naming it', () => {
  const file = join(dir, 'herald.db');
  writeFileSync(`${file}.key`, 'not a key\n');
  assert.throws(
    () => loadEncryptionKey(`sqlite:${file}`, undefined),
    (error: unknown) =>
      error instanceof ConfigError && error.variable === 'ENCRYPTION_KEY' && error.message.includes(`${file}.key`),
  );
});

it('stops a PostgreSQL start without ENCRYPTION_KEY in one line, before it touches the database', async () => {
  // Nothing listens on port 1: a start that reached the database would fail otherwise.
  await assert.rejects(
    createContext(loadConfig({ DATABASE_URL: 'postgres://herald@127.0.0.1:1/herald' })),
    (error: unknown) =>
      error instanceof ConfigError && error.message.startsWith('invalid ENCRYPTION_KEY: must be set on PostgreSQL'),
  );
  const database = await createTestDatabase('postgres');
  try {
    const result = await herald(['serve'], { DATABASE_URL: database.url, ENCRYPTION_KEY: '' });
    assert.equal(result.code, 1);
    assert.match(
      result.stderr,
      new RegExp(
        /^herald: invalid ENCRYPTION_KEY: must be set on PostgreSQL, where every host must hold the same key /.source +
          /[^\n]*openssl rand -hex 32\n$/.source,
      ),
    );
  } finally {
    await database.close();
  }
});
