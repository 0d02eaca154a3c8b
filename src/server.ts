import type { FastifyInstance } from 'fastify';
import { systemClock, type Clock } from './clock.ts';
import type { Config } from './config.ts';
import type { AppContext } from './context.ts';
import { migrateToLatest, openDatabase } from './db/database.ts';
import { loadSigningKey } from './auth/signing-key.ts';
import { createCounterStore } from './ratelimit/counters.ts';
import { createMetricsRegistry } from './http/metrics.ts';
import { purgeExpiredIdempotencyKeys } from './http/idempotency.ts';
import { buildApp } from './app.ts';

/** Opens the database (migrating it), loads the signing key and the counter store. */
export async function createContext(config: Config, clock: Clock = systemClock): Promise<AppContext> {
  const database = openDatabase(config.databaseUrl);
  await migrateToLatest(database);
  return {
    config,
    database,
    db: database.db,
    clock,
    counters: createCounterStore(config.redisUrl),
    jwtKey: await loadSigningKey(database.db, config.jwtSecret),
    metrics: createMetricsRegistry(),
  };
}

export async function closeContext(ctx: AppContext): Promise<void> {
  await ctx.counters.close();
  await ctx.database.close();
}

const HOUR_MS = 60 * 60_000;

/**
 * `herald serve`: listens, and on SIGTERM or SIGINT stops accepting, lets in-flight
 * requests finish (Fastify's close), then closes the database.
 */
export async function serve(config: Config): Promise<FastifyInstance> {
  const ctx = await createContext(config);
  const app = await buildApp(ctx, { logger: { level: config.logLevel } });
  const purge = setInterval(() => {
    purgeExpiredIdempotencyKeys(ctx.db, ctx.clock).catch((err) => app.log.warn({ err }, 'idempotency purge failed'));
  }, HOUR_MS);
  purge.unref();

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    app.log.info({ signal }, 'shutting down');
    clearInterval(purge);
    await app.close();
    await closeContext(ctx);
    process.exit(0);
  };
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));

  await app.listen({ port: config.port, host: config.host });
  app.log.info({ database: ctx.database.dialect }, 'herald is serving');
  return app;
}
