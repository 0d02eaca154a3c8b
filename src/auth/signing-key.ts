import { createSecretKey, randomBytes, type KeyObject } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Schema } from '../db/schema.ts';

/**
 * JWT_SECRET when set; otherwise a key generated on first start and kept in the database,
 * so every process sharing the database signs and verifies with the same key.
 * A KeyObject rather than bytes: jose caches the WebCrypto key it derives from a KeyObject,
 * but imports raw bytes afresh on every call (a tenth of an authenticated request's CPU).
 */
export async function loadSigningKey(db: Kysely<Schema>, configured: string | undefined): Promise<KeyObject> {
  if (configured) return createSecretKey(Buffer.from(configured));
  await db
    .insertInto('settings')
    .values({ key: 'jwt_secret', value: randomBytes(32).toString('base64url') })
    .onConflict((oc) => oc.column('key').doNothing())
    .execute();
  const row = await db.selectFrom('settings').select('value').where('key', '=', 'jwt_secret').executeTakeFirstOrThrow();
  return createSecretKey(Buffer.from(row.value, 'base64url'));
}
