import { createSecretKey, randomBytes, type KeyObject } from 'node:crypto';
import type { Kysely } from 'kysely';
import { ConfigError } from './config.ts';
import type { Schema } from './db/schema.ts';
import { resealed, seal, tryOpen, type Keyring } from './sealed.ts';

/**
 * Keys Herald makes once (32 random bytes) and keeps for good in `settings`, so that every
 * process sharing the database uses the same one, sealed under a key derived from
 * ENCRYPTION_KEY for their purpose: a copy of the database alone (a backup, a dump) uses none.
 * The access tokens' key (auth/signing-key.ts) and the key of Verify's code hashes
 * (verify/codes.ts) are kept so.
 */

type Db = Kysely<Schema>;

export interface SealedKey {
  /** The settings row that holds it, sealed. */
  row: string;
  /** What the sealing key is derived for (Keyring.derive). */
  purpose: string;
}

const place = (key: SealedKey) => `settings.${key.row}`;
const sealingKey = (keyring: Keyring, key: SealedKey) => keyring.derive(key.purpose);

/** A new key of 32 random bytes, sealed to be written as `key`'s row. */
export const sealedNewKey = (keyring: Keyring, key: SealedKey): string =>
  sealValue(keyring, key, randomBytes(32).toString('base64url'));

/** `clear` (the key in base64url) sealed as `key`'s row holds it. */
export const sealValue = (keyring: Keyring, key: SealedKey, clear: string): string =>
  seal(sealingKey(keyring, key).current, clear, place(key));

/**
 * The key, made and written first by whichever process asks first; undefined when the row was
 * sealed under an ENCRYPTION_KEY that is neither the current one nor one it replaced.
 */
export async function loadSealedKey(db: Db, keyring: Keyring, key: SealedKey): Promise<KeyObject | undefined> {
  await db
    .insertInto('settings')
    .values({ key: key.row, value: sealedNewKey(keyring, key) })
    .onConflict((oc) => oc.column('key').doNothing())
    .execute();
  const row = await db.selectFrom('settings').select('value').where('key', '=', key.row).executeTakeFirstOrThrow();
  const clear = tryOpen(sealingKey(keyring, key), row.value, place(key));
  return clear === undefined ? undefined : createSecretKey(Buffer.from(clear, 'base64url'));
}

/**
 * How each process reads `key`: made by the first process that needs it, then read once per
 * process (and keyring); a read that failed is tried again at the next. It fails when the row
 * was sealed under a key no longer given, naming `what` the key is for.
 */
export function sealedKeyReader(key: SealedKey, what: string): (db: Db, keyring: Keyring) => Promise<KeyObject> {
  const loaded = new WeakMap<Keyring, Promise<KeyObject>>();
  return (db, keyring) => {
    let read = loaded.get(keyring);
    if (!read) {
      read = loadSealedKey(db, keyring, key).then((opened) => {
        if (opened) return opened;
        throw new Error(
          `ENCRYPTION_KEY: the key of ${what} was sealed under another key; give that one in ENCRYPTION_KEY_PREVIOUS`,
        );
      });
      read.catch(() => loaded.delete(keyring));
      loaded.set(keyring, read);
    }
    return read;
  };
}

/** `key`'s row as sealed; undefined before any process made it. */
export async function sealedKeyRow(db: Db, key: SealedKey): Promise<string | undefined> {
  const row = await db.selectFrom('settings').select('value').where('key', '=', key.row).executeTakeFirst();
  return row?.value;
}

/** Whether `sealed`, `key`'s row, opens under the keyring. */
export const opensSealedKey = (keyring: Keyring, key: SealedKey, sealed: string): boolean =>
  tryOpen(sealingKey(keyring, key), sealed, place(key)) !== undefined;

/** The key sealed anew under the current ENCRYPTION_KEY if one it replaced sealed it (sealed.ts, resealed). */
export async function resealKey(db: Db, keyring: Keyring, key: SealedKey): Promise<void> {
  const row = await db.selectFrom('settings').select('value').where('key', '=', key.row).executeTakeFirst();
  const again = row && resealed(sealingKey(keyring, key), row.value, place(key));
  if (!again) return;
  await db
    .updateTable('settings')
    .set({ value: again })
    .where('key', '=', key.row)
    .where('value', '=', row.value)
    .execute();
}

/**
 * At every start (server/stored-secrets.ts): `key` made if there is none yet, by `load` (the
 * key's own loader, which throws when its row does not open). One sealed under an
 * ENCRYPTION_KEY no longer given is replaced while nothing depends on it (`dependedOn`); while
 * something does, the start stops, with `load`'s reason.
 */
export async function prepareSealedKey(
  db: Db,
  keyring: Keyring,
  key: SealedKey,
  load: () => Promise<unknown>,
  dependedOn: () => Promise<boolean>,
): Promise<void> {
  const unopened = await sealedKeyRow(db, key);
  try {
    await load();
    return;
  } catch (error) {
    if (await dependedOn())
      throw new ConfigError('ENCRYPTION_KEY', (error as Error).message.replace(/^ENCRYPTION_KEY: /, ''));
  }
  // Only the row this process could not open: processes starting together replace it once, and
  // each then loads the one that won (two keys would split erasures and Verify's codes between them).
  if (unopened !== undefined) {
    await db
      .updateTable('settings')
      .set({ value: sealedNewKey(keyring, key) })
      .where('key', '=', key.row)
      .where('value', '=', unopened)
      .execute();
  }
  await load();
}
