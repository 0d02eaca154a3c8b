import { Redis } from 'ioredis';

/**
 * Fixed-window counters, the state behind rate limits and login throttling.
 * The window is chosen from the injected clock, so the store only counts and expires;
 * in memory for one process, in Redis when several API processes must share limits.
 */
export interface WindowCount {
  count: number;
  /** Epoch ms at which the window ends and the count starts again from zero. */
  resetAt: number;
}

export interface CounterStore {
  /** Adds one to `key`'s counter in the window holding `now`, and returns the new count. */
  increment(key: string, windowMs: number, now: number): Promise<WindowCount>;
  /** The count in the window holding `now`, without adding to it. */
  peek(key: string, windowMs: number, now: number): Promise<WindowCount>;
  clear(key: string, windowMs: number, now: number): Promise<void>;
  close(): Promise<void>;
}

function windowOf(key: string, windowMs: number, now: number): { id: string; resetAt: number } {
  const index = Math.floor(now / windowMs);
  return { id: `${key}:${windowMs}:${index}`, resetAt: (index + 1) * windowMs };
}

export class MemoryCounterStore implements CounterStore {
  private readonly counts = new Map<string, { count: number; resetAt: number }>();
  private operations = 0;

  async increment(key: string, windowMs: number, now: number): Promise<WindowCount> {
    if (++this.operations % 10_000 === 0) this.sweep(now);
    const { id, resetAt } = windowOf(key, windowMs, now);
    const entry = this.counts.get(id) ?? { count: 0, resetAt };
    entry.count += 1;
    this.counts.set(id, entry);
    return { count: entry.count, resetAt };
  }

  async peek(key: string, windowMs: number, now: number): Promise<WindowCount> {
    const { id, resetAt } = windowOf(key, windowMs, now);
    return { count: this.counts.get(id)?.count ?? 0, resetAt };
  }

  async clear(key: string, windowMs: number, now: number): Promise<void> {
    this.counts.delete(windowOf(key, windowMs, now).id);
  }

  async close(): Promise<void> {
    this.counts.clear();
  }

  private sweep(now: number): void {
    for (const [id, entry] of this.counts) if (entry.resetAt <= now) this.counts.delete(id);
  }
}

// INCR and the expiry in one round trip and atomically, so a crash between the two
// can never leave a counter without a TTL.
const INCREMENT_SCRIPT = `
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return count`;

export class RedisCounterStore implements CounterStore {
  private readonly redis: Redis;
  private readonly prefix: string;

  constructor(url: string, prefix = 'herald:counter:') {
    // No offline queue: while Redis is unreachable a command fails at once and the
    // caller decides (rate limits fail open) instead of requests hanging.
    this.redis = new Redis(url, { enableOfflineQueue: false, maxRetriesPerRequest: 1, lazyConnect: false });
    this.redis.on('error', () => {});
    this.prefix = prefix;
  }

  async increment(key: string, windowMs: number, now: number): Promise<WindowCount> {
    await this.ready();
    const { id, resetAt } = windowOf(key, windowMs, now);
    const count = (await this.redis.eval(INCREMENT_SCRIPT, 1, this.prefix + id, String(windowMs + 1000))) as number;
    return { count, resetAt };
  }

  async peek(key: string, windowMs: number, now: number): Promise<WindowCount> {
    await this.ready();
    const { id, resetAt } = windowOf(key, windowMs, now);
    const value = await this.redis.get(this.prefix + id);
    return { count: value === null ? 0 : Number(value), resetAt };
  }

  async clear(key: string, windowMs: number, now: number): Promise<void> {
    await this.ready();
    await this.redis.del(this.prefix + windowOf(key, windowMs, now).id);
  }

  async close(): Promise<void> {
    this.redis.disconnect();
  }

  private async ready(): Promise<void> {
    if (this.redis.status === 'ready') return;
    if (this.redis.status === 'connecting' || this.redis.status === 'connect' || this.redis.status === 'reconnecting') {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('Redis is not reachable')), 2000);
        this.redis.once('ready', () => {
          clearTimeout(timer);
          resolve();
        });
      });
      return;
    }
    throw new Error(`Redis is not reachable (${this.redis.status})`);
  }
}

export function createCounterStore(redisUrl: string | undefined): CounterStore {
  return redisUrl ? new RedisCounterStore(redisUrl) : new MemoryCounterStore();
}
