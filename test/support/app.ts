import type { KeyObject } from 'node:crypto';
import type { FastifyInstance, FastifyServerOptions, LightMyRequestResponse } from 'fastify';
import { ManualClock } from '../../src/clock.ts';
import { loadConfig } from '../../src/config.ts';
import type { AppContext } from '../../src/context.ts';
import type { DialectName } from '../../src/db/database.ts';
import { buildApp } from '../../src/server/app.ts';
import { loadEncryptionKey } from '../../src/messaging/encryption-key.ts';
import { prepareStoredSecrets } from '../../src/server/stored-secrets.ts';
import { generateKey } from '../../src/sealed.ts';
import { MemoryCounterStore, type CounterStore } from '../../src/ratelimit/counters.ts';
import { createMetricsRegistry } from '../../src/http/metrics.ts';
import { createAccount, type AccountRow } from '../../src/accounts/service.ts';
import { createTestDatabase, type TestDatabase } from './databases.ts';

export const ADMIN_TOKEN = 'test-admin-token-0123456789';

export interface TestApp {
  app: FastifyInstance;
  ctx: AppContext;
  clock: ManualClock;
  database: TestDatabase;
  /** An account with a known password; each call makes a new one. */
  createAccount(overrides?: { userName?: string; password?: string }): Promise<TestAccount>;
  /** A Default-validity token for the account, through POST /token. */
  tokenFor(account: TestAccount, validity?: string): Promise<string>;
  close(): Promise<void>;
}

export interface TestAccount {
  row: AccountRow;
  userName: string;
  password: string;
  privateToken: string;
}

let accountCounter = 0;

/**
 * PostgreSQL requires ENCRYPTION_KEY (server.ts), so its tests are given one, the same to every
 * app on one database, as SQLite's apps share the key file beside theirs: the database's token
 * key is sealed under it.
 */
const postgresKeys = new WeakMap<TestDatabase, KeyObject>();
function postgresKeyOf(database: TestDatabase): KeyObject {
  let key = postgresKeys.get(database);
  if (!key) {
    key = generateKey();
    postgresKeys.set(database, key);
  }
  return key;
}

export async function startTestApp(
  dialect: DialectName,
  options: {
    env?: Record<string, string>;
    counters?: CounterStore;
    clock?: ManualClock;
    database?: TestDatabase;
    logger?: FastifyServerOptions['logger'];
  } = {},
): Promise<TestApp> {
  const database = options.database ?? (await createTestDatabase(dialect));
  const clock = options.clock ?? new ManualClock(Date.UTC(2026, 10, 22, 12, 0, 0));
  const config = loadConfig({ DATABASE_URL: database.url, ADMIN_TOKEN, LOG_LEVEL: 'silent', ...options.env });
  const configured = config.encryptionKey ?? (dialect === 'postgres' ? postgresKeyOf(database) : undefined);
  const encryptionKey = loadEncryptionKey(database.url, configured, config.previousEncryptionKeys);
  const ctx: AppContext = {
    config,
    database,
    db: database.db,
    clock,
    counters: options.counters ?? new MemoryCounterStore(),
    jwtKey: await prepareStoredSecrets(database, encryptionKey, config.jwtSecret),
    encryptionKey,
    metrics: createMetricsRegistry(),
  };
  const app = await buildApp(ctx, { logger: options.logger });
  await app.ready();

  const testApp: TestApp = {
    app,
    ctx,
    clock,
    database,
    async createAccount(overrides = {}) {
      const userName = overrides.userName ?? `user${++accountCounter}-${process.pid}@example.com`;
      const password = overrides.password ?? 'correct horse battery staple';
      const row = await createAccount(database.db, clock, { userName, password });
      return { row, userName, password, privateToken: row.privateToken };
    },
    async tokenFor(account, validity = 'Default') {
      const response = await app.inject({
        method: 'POST',
        url: '/token',
        payload: {
          userName: account.userName,
          password: account.password,
          privateToken: account.privateToken,
          validity,
        },
      });
      if (response.statusCode !== 200) throw new Error(`POST /token answered ${response.statusCode}: ${response.body}`);
      return response.json().access_token as string;
    },
    async close() {
      await app.close();
      if (!options.counters) await ctx.counters.close();
      if (!options.database) await database.close();
    },
  };
  return testApp;
}

export function bearer(token: string): Record<string, string> {
  return { authorization: `Bearer ${token}` };
}

export function errorFields(response: LightMyRequestResponse): string[] {
  return (response.json().errors as Array<{ field: string }>).map((e) => e.field);
}
