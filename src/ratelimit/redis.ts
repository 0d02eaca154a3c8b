import { Redis } from 'ioredis';

/**
 * A Redis client for state shared by several processes (rate-limit counters, the SMPP submit
 * rate). No offline queue: while Redis is unreachable a command fails at once and the caller
 * decides (rate limits fail open, the SMPP rate falls back to its process's share) instead of
 * waiting. `commandTimeoutMs` bounds a Redis that takes a command and never answers.
 */
export function connectRedis(url: string, options: { commandTimeoutMs?: number } = {}): Redis {
  const redis = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    lazyConnect: false,
    commandTimeout: options.commandTimeoutMs,
  });
  // Each caller reports the failures of its own commands; the client's reconnection errors would only repeat them.
  redis.on('error', () => {});
  return redis;
}

/**
 * Resolves once the client can take commands: at once when connected, else waiting at most
 * `timeoutMs` while it connects.
 */
export async function redisReady(redis: Redis, timeoutMs: number): Promise<void> {
  if (redis.status === 'ready') return;
  if (redis.status !== 'connecting' && redis.status !== 'connect' && redis.status !== 'reconnecting')
    throw new Error(`Redis is not reachable (${redis.status})`);
  await new Promise<void>((resolve, reject) => {
    const connected = () => {
      clearTimeout(timer);
      resolve();
    };
    const timer = setTimeout(() => {
      redis.off('ready', connected);
      reject(new Error('Redis is not reachable'));
    }, timeoutMs);
    redis.once('ready', connected);
  });
}
