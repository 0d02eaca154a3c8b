import { resolve } from 'node:path';
import { systemClock, type Clock } from '../clock.ts';
import { ConfigError, type Config } from '../config.ts';
import type { AppContext } from '../context.ts';
import { migrateToLatest, openDatabase, sqlitePath } from '../db/database.ts';
import { takeServeLock, type ServeLock } from '../db/serve-lock.ts';
import { PROCEDURE_MODULES } from './procedures.ts';
import { loadEncryptionKey } from '../messaging/encryption-key.ts';
import { prepareStoredSecrets } from './stored-secrets.ts';
import { createCounterStore } from '../ratelimit/counters.ts';
import { createMetricsRegistry } from '../http/metrics.ts';
import { buildApp, buildWorkerApp } from './app.ts';
import { createWorker } from './worker.ts';
import type { InboundSmtp } from '../email/inbound-smtp.ts';

/**
 * Loads the encryption key, opens the database (migrating it), seals its secrets and loads the
 * signing key (stored-secrets.ts), and the counter store.
 */
export async function createContext(config: Config, clock: Clock = systemClock): Promise<AppContext> {
  // First: a PostgreSQL start without ENCRYPTION_KEY stops before it touches the database.
  const encryptionKey = loadEncryptionKey(config.databaseUrl, config.encryptionKey, config.previousEncryptionKeys);
  const database = openDatabase(config.databaseUrl, { procedures: PROCEDURE_MODULES });
  await database.ready();
  await migrateToLatest(database);
  return {
    config,
    database,
    db: database.db,
    clock,
    counters: createCounterStore(config.redisUrl),
    jwtKey: await prepareStoredSecrets(database, encryptionKey, config.jwtSecret),
    encryptionKey,
    metrics: createMetricsRegistry(),
  };
}

export async function closeContext(ctx: AppContext): Promise<void> {
  await ctx.counters.close();
  await ctx.database.close();
}

/** A start-up failure the operator fixes by hand: the CLI prints its message alone, no stack. */
export class StartError extends Error {}

/** Where a listener binds, and the variable that moves it. */
interface Bind {
  host: string;
  port: number;
  portVariable: 'PORT' | 'WORKER_PORT' | 'INBOUND_SMTP_PORT';
}

/** Starts a listener at `bind`; an address it cannot take is a StartError naming the variable to change. */
async function listen<T>(start: (bind: Bind) => Promise<T>, bind: Bind): Promise<T> {
  try {
    return await start(bind);
  } catch (error) {
    const code = (error as { code?: string }).code;
    const reasons: Record<string, string> = {
      EADDRINUSE: 'is already in use',
      EACCES: 'may not be bound by this user',
      EADDRNOTAVAIL: 'is not an address of this machine',
      ENOTFOUND: 'is not a name this machine resolves',
      EAI_AGAIN: 'is not a name this machine resolves',
    };
    const reason = code === undefined ? undefined : reasons[code];
    if (reason === undefined) throw error;
    const { host, port, portVariable } = bind;
    throw new StartError(
      `cannot listen on HOST ${host} ${portVariable} ${port}: it ${reason} (${code}); ` +
        `set ${portVariable} or HOST to another value`,
    );
  }
}

/** On SQLite, the lock that keeps a second serve off the database (db/serve-lock.ts). */
function lockForServe(file: string): ServeLock | undefined {
  if (file === ':memory:') return undefined;
  const lock = takeServeLock(file);
  if (lock) return lock;
  const database = resolve(file);
  throw new StartError(
    `another herald serve holds the SQLite database ${database} (its lock is ` +
      `on ${database}-serve.lock); stop that one first, or set DATABASE_URL to another database`,
  );
}

export const ROLES = ['all', 'api', 'worker'] as const;
export type Role = (typeof ROLES)[number];

/**
 * `herald serve`: the HTTP API, the queue's workers, or both (the default). The inbound SMTP
 * listener (INBOUND_SMTP_PORT) runs beside the API, not the workers: like the API it takes
 * what others send, on a port the operator publishes (the MX), and records it as it comes.
 * On SIGTERM or SIGINT it stops accepting, lets in-flight requests, mail and running jobs
 * finish (Fastify's close, the listener's, the worker's grace period), then closes the database.
 */
export async function serve(config: Config, role: Role = 'all'): Promise<void> {
  const sqliteFile = sqlitePath(config.databaseUrl);
  if (sqliteFile !== undefined && role !== 'all') {
    throw new ConfigError(
      '--role',
      'api and worker run as separate processes on PostgreSQL only; on SQLite one process does both (--role all)',
    );
  }
  // Taken before the database is opened, so a refused serve has neither migrated nor written.
  const lock = sqliteFile === undefined ? undefined : lockForServe(sqliteFile);
  let ctx: AppContext;
  try {
    ctx = await createContext(config);
  } catch (error) {
    lock?.release();
    throw error;
  }
  const close = async () => {
    await closeContext(ctx);
    lock?.release();
  };
  const logger = { level: config.logLevel };
  const app = role === 'worker' ? buildWorkerApp(ctx, { logger }) : await buildApp(ctx, { logger });
  const bind: Bind =
    role === 'worker'
      ? { host: config.host, port: config.workerPort, portVariable: 'WORKER_PORT' }
      : { host: config.host, port: config.port, portVariable: 'PORT' };
  const log = app.log;
  // Made once the port is ours: it opens the transports, and a worker that cannot listen binds
  // to no SMSC (a supervisor restarting it would take and drop the operator's binds).
  let worker: ReturnType<typeof createWorker> | undefined;
  let inbound: InboundSmtp | undefined;

  let stopping = false;
  // Fastify's close waits for every open connection, and an HTTP keep-alive connection that
  // was busy at SIGTERM would otherwise stay open for the 72 s keep-alive timeout: a response
  // sent while stopping closes its connection.
  app.addHook('onSend', async (_request, reply) => {
    if (stopping) reply.header('connection', 'close');
  });
  const stop = async (signal: string, code = 0) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    await Promise.all([app.close(), inbound?.close(), worker?.stop()]);
    await close();
    process.exit(code);
  };
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));
  // A process that can write nothing more stops, failed, for its supervisor to start it again.
  void ctx.database.lost?.then((error) => {
    log.fatal({ err: error }, 'the database can no longer be used in this process: stopping');
    void stop('database lost', 1);
  });

  try {
    await listen(({ host, port }) => app.listen({ host, port }), bind);
    if (role !== 'worker' && config.inboundSmtpPort !== undefined) {
      // Loaded only here: SMTP and MIME libraries that a service without the listener need not carry.
      const { startInboundSmtp } = await import('../email/inbound-smtp.ts');
      inbound = await listen(({ host, port }) => startInboundSmtp(ctx, { host, port, log }), {
        host: config.host,
        port: config.inboundSmtpPort,
        portVariable: 'INBOUND_SMTP_PORT',
      });
    }
    if (role !== 'api') {
      worker = createWorker(ctx, {
        log,
        shutdownGraceMs: config.shutdownGraceSeconds * 1000,
        leaseMs: config.jobLeaseSeconds * 1000,
      });
    }
    await worker?.start();
  } catch (error) {
    await Promise.all([app.close(), inbound?.close(), worker?.stop()]);
    await close();
    throw error;
  }
  log.info({ database: ctx.database.dialect, role, inboundSmtpPort: inbound?.port }, 'herald is serving');
}
