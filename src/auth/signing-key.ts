import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Schema } from '../db/schema.ts';

/**
 * JWT_SECRET when set; otherwise a key generated on first start and kept in the database,
 * so every process sharing the database signs and verifies with the same key.
 */
export async function loadSigningKey(db: Kysely<Schema>, configured: string | undefined): Promise<Uint8Array> {
  if (configured) return new TextEncoder().encode(configured);
  await db
    .insertInto('settings')
    .values({ key: 'jwt_secret', value: randomBytes(32).toString('base64url') })
    .onConflict((oc) => oc.column('key').doNothing())
    .execute();
  const row = await db.selectFrom('settings').select('value').where('key', '=', 'jwt_secret').executeTakeFirstOrThrow();
  return Buffer.from(row.value, 'base64url');
}
