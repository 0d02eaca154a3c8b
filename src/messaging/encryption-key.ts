import { randomBytes, type KeyObject } from 'node:crypto';
import { closeSync, fsyncSync, linkSync, mkdirSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { ConfigError } from '../config.ts';
import { sqlitePath } from '../db/database.ts';
import { generateKey, keyFromHex, Keyring } from '../sealed.ts';

/**
 * The key of sealed values (sealed.ts), ENCRYPTION_KEY (ARCHITECTURE.md, "Configuration"):
 * the configured one when set. Otherwise, on SQLite, a key generated on the first start and
 * kept beside the database, in `<database>.key` (mode 0600): never in the database it
 * protects, so the database file alone (a copy, a backup, a dump) does not open its sealed
 * bodies. PostgreSQL has no "beside": its processes run on several hosts, which must all hold
 * the same key, so there it must be set.
 */
export function loadEncryptionKey(
  databaseUrl: string,
  configured: KeyObject | undefined,
  previous: readonly KeyObject[] = [],
): Keyring {
  return new Keyring(configured ?? keyOfDatabase(databaseUrl), previous);
}

function keyOfDatabase(databaseUrl: string): KeyObject {
  const file = sqlitePath(databaseUrl);
  if (file === undefined) {
    throw new ConfigError(
      'ENCRYPTION_KEY',
      'must be set on PostgreSQL, where every host must hold the same key and it must not live in the ' +
        'database it protects: 64 hex characters, such as the output of openssl rand -hex 32',
    );
  }
  // An in-memory database dies with its process, and its sealed values with it.
  if (file === ':memory:') return generateKey();
  const path = `${file}.key`;
  return readKeyFile(path) ?? createKeyFile(path);
}

function readKeyFile(path: string): KeyObject | undefined {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  const key = keyFromHex(text.trim());
  if (!key) {
    const remedy =
      'restore it from a backup (what was sealed under it cannot be read without it), or set ENCRYPTION_KEY';
    throw new ConfigError('ENCRYPTION_KEY', `the key file ${resolve(path)} does not hold 64 hex characters: ${remedy}`);
  }
  return key;
}

/**
 * Written whole to a file of its own, then linked to its name, which fails if the name is
 * taken: of two processes starting at once, one key wins and both read it; neither ever
 * reads a half-written file. Synced, file and directory, before the key seals anything.
 */
function createKeyFile(path: string): KeyObject {
  const directory = dirname(path);
  mkdirSync(directory, { recursive: true });
  const draft = `${path}.${process.pid}-${randomBytes(6).toString('hex')}`;
  const fd = openSync(draft, 'wx', 0o600);
  try {
    writeSync(fd, `${randomBytes(32).toString('hex')}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  try {
    linkSync(draft, path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  } finally {
    unlinkSync(draft);
  }
  const dir = openSync(directory, 'r');
  try {
    fsyncSync(dir);
  } finally {
    closeSync(dir);
  }
  return readKeyFile(path)!;
}
