import type { KeyObject } from 'node:crypto';
import type { Keyring } from './sealed.ts';
import type { Kysely } from 'kysely';
import type { Registry } from 'prom-client';
import type { Clock } from './clock.ts';
import type { Config } from './config.ts';
import type { Database } from './db/database.ts';
import type { Schema } from './db/schema.ts';
import type { CounterStore } from './ratelimit/counters.ts';

/** What every module's routes and services are given: built once in server.ts (or by a test). */
export interface AppContext {
  config: Config;
  database: Database;
  db: Kysely<Schema>;
  clock: Clock;
  counters: CounterStore;
  /** HS256 key of access tokens. */
  jwtKey: KeyObject;
  /**
   * ENCRYPTION_KEY: seals the bodies, tag values and rendered texts of isBodyEncrypted sends, and
   * Idempotency-Key records (sealed.ts).
   */
  encryptionKey: Keyring;
  metrics: Registry;
}
