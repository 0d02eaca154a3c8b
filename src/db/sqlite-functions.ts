import { createHmac } from 'node:crypto';
import type { DatabaseSync } from 'node:sqlite';

/**
 * SQL functions Herald's statements use that SQLite lacks, registered on every connection it
 * opens. `hmac_sha256(key, value)`: HMAC-SHA256 of the text under the key (a blob), in lower-case
 * hex, as PostgreSQL computes it from sha256() (messaging/queries.ts, erasedAddress).
 */
export function registerFunctions(native: DatabaseSync): void {
  native.function('hmac_sha256', { deterministic: true }, (key, value) =>
    value === null
      ? null
      : createHmac('sha256', key as Uint8Array)
          .update(String(value), 'utf8')
          .digest('hex'),
  );
}
