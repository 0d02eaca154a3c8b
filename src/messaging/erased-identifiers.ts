import { createHmac, createSecretKey, type KeyObject } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Schema } from '../db/schema.ts';
import { prepareSealedKey, resealKey, sealedKeyReader, type SealedKey } from '../sealed-keys.ts';
import type { Keyring } from '../sealed.ts';

/**
 * An erased person's number or address is kept only as its keyed hash (ARCHITECTURE.md, "Data
 * rights and management"): in the rows that held it, and in their suppression, so they are never
 * messaged again. The hash is HMAC-SHA256 under a key Herald makes once and keeps sealed by
 * ENCRYPTION_KEY (sealed-keys.ts): replacing ENCRYPTION_KEY re-seals the key and leaves every
 * hash as it was, so the erased stay suppressed; a copy of the database alone cannot test the
 * numbers of a country against a hash. The hashes are made here only, never in SQL: a
 * statement carrying the key would leave it in any server log of parameters (recipients.ts,
 * erasedAmong, looks a send's addresses up by their hashes).
 */

export const ERASURE_KEY: SealedKey = { row: 'sealed_erasure_key', purpose: 'herald erased identifiers' };

/**
 * The reason of a recipient an erasure ended before it was sent. A page a worker had already
 * handed over records nothing over such a row (docs/privacy.md, "Erasure"): no status,
 * history, part, suppression or event of the page names the person.
 */
export const ERASED_REASON = 'erased';

/** What an erased identifier becomes: never a number (digits) nor an address (with @). */
export const ERASED_PREFIX = 'erased:';

/** Whether a recipient's address is an erased person's hash: what comes back for it is recorded no more. */
export const isErased = (address: string): boolean => address.startsWith(ERASED_PREFIX);

// An HMAC from a KeyObject takes a seventh of the time it takes from the key's bytes.
const keyObjects = new WeakMap<Buffer, KeyObject>();

/** The identifier's keyed hash, as rows and suppressions keep it. */
export function erasedAddress(key: Buffer, identifier: string): string {
  let keyObject = keyObjects.get(key);
  if (!keyObject) {
    keyObject = createSecretKey(key);
    keyObjects.set(key, keyObject);
  }
  return ERASED_PREFIX + createHmac('sha256', keyObject).update(identifier, 'utf8').digest('hex');
}

const readErasureKey = sealedKeyReader(ERASURE_KEY, 'erased identifiers');

const exported = new WeakMap<KeyObject, Buffer>();

/**
 * The key of erased identifiers' hashes, as bytes: made by the first process that needs it, then
 * read once per process. The same Buffer each time, which erasedAddress keeps its KeyObject by.
 */
export async function erasureKey(db: Kysely<Schema>, keyring: Keyring): Promise<Buffer> {
  const key = await readErasureKey(db, keyring);
  let bytes = exported.get(key);
  if (!bytes) {
    bytes = key.export();
    exported.set(key, bytes);
  }
  return bytes;
}

/** The key sealed anew under the current ENCRYPTION_KEY if one it replaced sealed it (server/stored-secrets.ts). */
export const resealErasureKey = (db: Kysely<Schema>, keyring: Keyring): Promise<void> =>
  resealKey(db, keyring, ERASURE_KEY);

/**
 * At every start (server/stored-secrets.ts), before anything sends: the key made if there is
 * none yet, so a read on a read-only connection (a dry run) never has to write it. One sealed
 * under an ENCRYPTION_KEY no longer given is replaced while no erased person's suppression
 * depends on it (nothing is lost); once one does, the start stops: a new key would let the
 * erased be messaged again.
 */
export const prepareErasureKey = (db: Kysely<Schema>, keyring: Keyring): Promise<void> =>
  prepareSealedKey(
    db,
    keyring,
    ERASURE_KEY,
    () => erasureKey(db, keyring),
    async () => (await db.selectFrom('erased_suppressions').select('hash').limit(1).executeTakeFirst()) !== undefined,
  );
