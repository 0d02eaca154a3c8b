import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';

export const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/** A key prefix of the test run's own, and a way to delete its keys at the end (how many there were). */
export function redisPrefix(name: string): { prefix: string; clean: () => Promise<number> } {
  const prefix = `herald-test:${name}:${randomBytes(4).toString('hex')}:`;
  return {
    prefix,
    async clean() {
      const redis = new Redis(REDIS_URL);
      try {
        const keys = await redis.keys(`${prefix}*`);
        if (keys.length > 0) await redis.del(...keys);
        return keys.length;
      } finally {
        redis.disconnect();
      }
    },
  };
}
