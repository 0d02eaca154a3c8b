import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { migrateToLatest, openDatabase, pendingMigrations, sqlitePath, type Database } from '../db/database.ts';
import { PROCEDURE_MODULES } from '../server/procedures.ts';
import { loadEncryptionKey } from '../messaging/encryption-key.ts';
import type { AccountRow } from '../accounts/service.ts';
import { findAccountByUserName } from '../auth/credentials.ts';
import { CommandError } from './commands.ts';
import type { Config } from '../config.ts';
import { ERASURE_KEY } from '../messaging/erased-identifiers.ts';
import { opensSealedKey, sealedKeyRow } from '../sealed-keys.ts';
import type { Keyring } from '../sealed.ts';

/** The database migrated, with the procedures (db/procedure.ts) the commands call, for `work`; closed after. */
export async function withDatabase<T>(config: Config, work: (database: Database) => Promise<T>): Promise<T> {
  const database = openDatabase(config.databaseUrl, { procedures: PROCEDURE_MODULES });
  try {
    await database.ready();
    await migrateToLatest(database);
    return await work(database);
  } finally {
    await database.close();
  }
}

// PostgreSQL's "invalid_catalog_name": the database named in DATABASE_URL does not exist.
const NO_SUCH_DATABASE = '3D000';

/**
 * The database as it is, for the commands that read: one that does not exist is not created
 * (node:sqlite would make an empty file, and a read of it answers nothing anyone uses) and one
 * behind the code is not migrated (a read is no time to change a schema): either is a
 * CommandError saying what to run.
 */
export async function withExistingDatabase<T>(config: Config, work: (database: Database) => Promise<T>): Promise<T> {
  const file = sqlitePath(config.databaseUrl);
  const where = file === undefined ? 'of DATABASE_URL' : file === ':memory:' ? file : resolve(file);
  if (file !== undefined && (file === ':memory:' || !existsSync(file))) {
    throw new CommandError(`the database ${where} does not exist: herald migrate (or herald serve) makes it`);
  }
  const database = openDatabase(config.databaseUrl, { procedures: PROCEDURE_MODULES });
  try {
    await database.ready();
    const pending = await pendingMigrations(database);
    if (pending.length > 0) {
      const behind = `${pending.length} migrations to run, from ${pending[0]}`;
      throw new CommandError(`the database ${where} is not migrated (${behind}): run herald migrate first`);
    }
    return await work(database);
  } catch (error) {
    if ((error as { code?: string }).code === NO_SUCH_DATABASE) {
      const reason = (error as Error).message;
      throw new CommandError(`the database ${where} does not exist (${reason}): create it, then run herald migrate`);
    }
    throw error;
  } finally {
    await database.close();
  }
}

export async function accountByUser(db: Database['db'], userName: string): Promise<AccountRow> {
  const account = await findAccountByUserName(db, userName);
  if (!account) throw new CommandError(`no account with the user name ${userName}`);
  return account;
}

/** ENCRYPTION_KEY, read only by the commands that seal or open secrets: the others run on PostgreSQL without it. */
export const keyringOf = (config: Config) =>
  loadEncryptionKey(config.databaseUrl, config.encryptionKey, config.previousEncryptionKeys);

/**
 * keyringOf for a command that seals or opens the database's secrets, refused unless it opens
 * the key every serve start makes there (the erased identifiers' key): a DKIM key or an SMSC's
 * URL sealed under another would be one serve cannot use. Only read: a database serve has not
 * started on yet takes any key. On SQLite with no ENCRYPTION_KEY and no key file beside a
 * database serve has started on, no key file is made: serve holds its key elsewhere.
 */
export async function keyringFor(config: Config, database: Database): Promise<Keyring> {
  const sealed = await sealedKeyRow(database.db, ERASURE_KEY);
  const file = config.encryptionKey === undefined ? sqlitePath(config.databaseUrl) : undefined;
  const elsewhere = 'give the command the ENCRYPTION_KEY herald serve runs with';
  if (file !== undefined && !existsSync(`${file}.key`) && sealed !== undefined) {
    throw new CommandError(`this database's secrets are sealed under a key that is not here: ${elsewhere}`);
  }
  const keyring = keyringOf(config);
  if (sealed !== undefined && !opensSealedKey(keyring, ERASURE_KEY, sealed)) {
    throw new CommandError(`ENCRYPTION_KEY does not open this database's secrets: ${elsewhere}`);
  }
  return keyring;
}
