import { createSecretKey, randomBytes, type KeyObject } from 'node:crypto';
import type { Kysely } from 'kysely';
import { ConfigError } from '../config.ts';
import type { Schema } from '../db/schema.ts';
import { resealed, seal, tryOpen, type Keyring } from '../sealed.ts';

/**
 * The HS256 key of access tokens: JWT_SECRET when set. Otherwise 32 random bytes made on the
 * first start and kept in the database, so that every process sharing it signs and verifies
 * with the same key, sealed under a key derived from ENCRYPTION_KEY: a copy of the database
 * alone (a backup, a dump) signs no token. A KeyObject rather than bytes: jose caches the
 * WebCrypto key it derives from a KeyObject, but imports raw bytes afresh on every call (a
 * tenth of an authenticated request's CPU).
 */

type Db = Kysely<Schema>;

/** The settings row of the sealed key. */
const SEALED = 'sealed_jwt_secret';
/** Where the code before migration 0027 kept the key in clear. */
const CLEAR = 'jwt_secret';
const PLACE = `settings.${SEALED}`;
const sealingKey = (keyring: Keyring) => keyring.derive('herald jwt secret');

const sealedNewKey = (keyring: Keyring) =>
  seal(sealingKey(keyring).current, randomBytes(32).toString('base64url'), PLACE);

export async function loadSigningKey(db: Db, keyring: Keyring, configured: string | undefined): Promise<KeyObject> {
  if (configured) return createSecretKey(Buffer.from(configured));
  await db
    .insertInto('settings')
    .values({ key: SEALED, value: sealedNewKey(keyring) })
    .onConflict((oc) => oc.column('key').doNothing())
    .execute();
  const row = await db.selectFrom('settings').select('value').where('key', '=', SEALED).executeTakeFirstOrThrow();
  const key = tryOpen(sealingKey(keyring), row.value, PLACE);
  if (key === undefined) {
    throw new ConfigError(
      'ENCRYPTION_KEY',
      'the key of access tokens in the database was sealed under another ENCRYPTION_KEY: set that one ' +
        '(or give it in ENCRYPTION_KEY_PREVIOUS while replacing it); if it is lost, herald rotate-jwt-secret ' +
        'makes a new key of access tokens, and every access token ends',
    );
  }
  return createSecretKey(Buffer.from(key, 'base64url'));
}

/**
 * The key the code before migration 0027 left in clear, sealed under its new name and
 * deleted; true if there was one. A sealed key already there wins: the clear one was then
 * made by a process on the old code started after the upgrade, and nothing must sign with it.
 */
export async function sealJwtSecret(db: Db, keyring: Keyring): Promise<boolean> {
  const clear = await db.selectFrom('settings').select('value').where('key', '=', CLEAR).executeTakeFirst();
  if (!clear) return false;
  await db
    .insertInto('settings')
    .values({ key: SEALED, value: seal(sealingKey(keyring).current, clear.value, PLACE) })
    .onConflict((oc) => oc.column('key').doNothing())
    .execute();
  await db.deleteFrom('settings').where('key', '=', CLEAR).where('value', '=', clear.value).execute();
  return true;
}

/** The key sealed anew under the current ENCRYPTION_KEY if one it replaced sealed it (sealed.ts, resealed). */
export async function resealJwtSecret(db: Db, keyring: Keyring): Promise<void> {
  const row = await db.selectFrom('settings').select('value').where('key', '=', SEALED).executeTakeFirst();
  const again = row && resealed(sealingKey(keyring), row.value, PLACE);
  if (!again) return;
  await db
    .updateTable('settings')
    .set({ value: again })
    .where('key', '=', SEALED)
    .where('value', '=', row.value)
    .execute();
}

/**
 * `herald rotate-jwt-secret`: a new key in place of the database's, for when a copy of it may
 * have leaked. Every token signed with the old one stops verifying where the new one is loaded:
 * in each process at its start (server.ts).
 */
export async function rotateJwtSecret(db: Db, keyring: Keyring): Promise<void> {
  const value = sealedNewKey(keyring);
  await db
    .insertInto('settings')
    .values({ key: SEALED, value })
    .onConflict((oc) => oc.column('key').doUpdateSet({ value }))
    .execute();
  await db.deleteFrom('settings').where('key', '=', CLEAR).execute();
}
