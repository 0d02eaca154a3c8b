import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { connectRedis, redisReady } from './redis.ts';

/**
 * The state behind rate limits (fixed-window counters) and login throttling (sliding
 * logs of failures). Times come from the injected clock, so the store only counts and
 * expires; in memory for one process, in Redis when several API processes must share them.
 */
export interface WindowCount {
  count: number;
  /** Epoch ms at which the window ends and the count starts again from zero. */
  resetAt: number;
}

export interface CounterStore {
  /** Adds one to `key`'s counter in the window holding `now`, and returns the new count. */
  increment(key: string, windowMs: number, now: number): Promise<WindowCount>;
  /** Logs an event at `now` under `key`; events older than `windowMs` are forgotten. */
  logEvent(key: string, windowMs: number, now: number): Promise<void>;
  /** The events of the last `windowMs`, and when the oldest of them leaves the window. */
  recentEvents(key: string, windowMs: number, now: number): Promise<WindowCount>;
  clearEvents(key: string): Promise<void>;
  close(): Promise<void>;
}

function windowOf(key: string, windowMs: number, now: number): { id: string; resetAt: number } {
  const index = Math.floor(now / windowMs);
  return { id: `${key}:${windowMs}:${index}`, resetAt: (index + 1) * windowMs };
}

export class MemoryCounterStore implements CounterStore {
  private readonly counts = new Map<string, { count: number; resetAt: number }>();
  private readonly logs = new Map<string, number[]>();
  private operations = 0;

  async increment(key: string, windowMs: number, now: number): Promise<WindowCount> {
    if (++this.operations % 10_000 === 0) this.sweep(now);
    const { id, resetAt } = windowOf(key, windowMs, now);
    const entry = this.counts.get(id) ?? { count: 0, resetAt };
    entry.count += 1;
    this.counts.set(id, entry);
    return { count: entry.count, resetAt };
  }

  async logEvent(key: string, windowMs: number, now: number): Promise<void> {
    const log = this.recent(key, windowMs, now);
    log.push(now);
    this.logs.set(key, log);
  }

  async recentEvents(key: string, windowMs: number, now: number): Promise<WindowCount> {
    const log = this.recent(key, windowMs, now);
    return { count: log.length, resetAt: log.length === 0 ? now : log[0] + windowMs };
  }

  async clearEvents(key: string): Promise<void> {
    this.logs.delete(key);
  }

  async close(): Promise<void> {
    this.counts.clear();
    this.logs.clear();
  }

  private recent(key: string, windowMs: number, now: number): number[] {
    const log = (this.logs.get(key) ?? []).filter((at) => at > now - windowMs);
    if (log.length === 0) this.logs.delete(key);
    return log;
  }

  private sweep(now: number): void {
    for (const [id, entry] of this.counts) if (entry.resetAt <= now) this.counts.delete(id);
  }
}

// Each script runs atomically in one round trip, sent once and then called by its SHA
// (ioredis's defineCommand uses EVALSHA): INCR and its expiry together, so a crash between
// the two can never leave a counter without a TTL; a log of events as a sorted set scored
// by time, trimmed to the window on every write and read.
const SCRIPTS = {
  heraldIncrement: `
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return count`,
  heraldLogEvent: `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1] - ARGV[2])
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1`,
  heraldRecentEvents: `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1] - ARGV[2])
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {redis.call('ZCARD', KEYS[1]), oldest[2] or ARGV[1] - ARGV[2]}`,
};

type ScriptedRedis = Redis & {
  heraldIncrement(key: string, ttlMs: string): Promise<number>;
  heraldLogEvent(key: string, now: string, windowMs: string, member: string): Promise<number>;
  heraldRecentEvents(key: string, now: string, windowMs: string): Promise<[number, string]>;
};

export class RedisCounterStore implements CounterStore {
  private readonly redis: ScriptedRedis;
  private readonly prefix: string;

  constructor(url: string, prefix = 'herald:counter:') {
    this.redis = connectRedis(url) as ScriptedRedis;
    for (const [name, lua] of Object.entries(SCRIPTS)) this.redis.defineCommand(name, { numberOfKeys: 1, lua });
    this.prefix = prefix;
  }

  async increment(key: string, windowMs: number, now: number): Promise<WindowCount> {
    await this.ready();
    const { id, resetAt } = windowOf(key, windowMs, now);
    const count = await this.redis.heraldIncrement(this.prefix + id, String(windowMs + 1000));
    return { count, resetAt };
  }

  async logEvent(key: string, windowMs: number, now: number): Promise<void> {
    await this.ready();
    await this.redis.heraldLogEvent(this.prefix + key, String(now), String(windowMs), `${now}:${randomUUID()}`);
  }

  async recentEvents(key: string, windowMs: number, now: number): Promise<WindowCount> {
    await this.ready();
    const [count, oldest] = await this.redis.heraldRecentEvents(this.prefix + key, String(now), String(windowMs));
    return { count, resetAt: count === 0 ? now : Number(oldest) + windowMs };
  }

  async clearEvents(key: string): Promise<void> {
    await this.ready();
    await this.redis.del(this.prefix + key);
  }

  async close(): Promise<void> {
    this.redis.disconnect();
  }

  private ready(): Promise<void> {
    return redisReady(this.redis, 2000);
  }
}

export function createCounterStore(redisUrl: string | undefined): CounterStore {
  return redisUrl ? new RedisCounterStore(redisUrl) : new MemoryCounterStore();
}
