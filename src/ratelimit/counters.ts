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
  /**
   * Logs one event at `now` under every key, each with its maximum, unless a key already holds
   * its maximum of events in the last `windowMs`: then nothing is logged, and that key's count
   * is the answer. At once for all the keys, so callers at the same moment cannot all pass a
   * count each read before any logged. Answers the event's name, for forgetEvent.
   */
  logEventUnlessFull(
    keys: ReadonlyArray<readonly [string, number]>,
    windowMs: number,
    now: number,
  ): Promise<{ event: string } | { full: WindowCount }>;
  /** Forgets one event logEventUnlessFull logged, under each of its keys. */
  forgetEvent(keys: readonly string[], event: string): Promise<void>;
  close(): Promise<void>;
}

function windowOf(key: string, windowMs: number, now: number): { id: string; resetAt: number } {
  const index = Math.floor(now / windowMs);
  return { id: `${key}:${windowMs}:${index}`, resetAt: (index + 1) * windowMs };
}

export class MemoryCounterStore implements CounterStore {
  private readonly counts = new Map<string, { count: number; resetAt: number }>();
  private readonly logs = new Map<string, Array<{ at: number; event: string }>>();
  /** The longest window a log was read over: a log whose newest event is older is gone from every window. */
  private longestLogWindowMs = 0;
  private operations = 0;

  async increment(key: string, windowMs: number, now: number): Promise<WindowCount> {
    this.tick(now);
    const { id, resetAt } = windowOf(key, windowMs, now);
    const entry = this.counts.get(id) ?? { count: 0, resetAt };
    entry.count += 1;
    this.counts.set(id, entry);
    return { count: entry.count, resetAt };
  }

  async logEvent(key: string, windowMs: number, now: number): Promise<void> {
    this.tick(now);
    const log = this.recent(key, windowMs, now);
    log.push({ at: now, event: randomUUID() });
    this.logs.set(key, log);
  }

  async recentEvents(key: string, windowMs: number, now: number): Promise<WindowCount> {
    const log = this.recent(key, windowMs, now);
    return { count: log.length, resetAt: log.length === 0 ? now : log[0].at + windowMs };
  }

  async clearEvents(key: string): Promise<void> {
    this.logs.delete(key);
  }

  async logEventUnlessFull(
    keys: ReadonlyArray<readonly [string, number]>,
    windowMs: number,
    now: number,
  ): Promise<{ event: string } | { full: WindowCount }> {
    this.tick(now);
    for (const [key, max] of keys) {
      const log = this.recent(key, windowMs, now);
      if (log.length >= max) return { full: { count: log.length, resetAt: log[0].at + windowMs } };
    }
    const event = randomUUID();
    for (const [key] of keys) this.logs.set(key, [...this.recent(key, windowMs, now), { at: now, event }]);
    return { event };
  }

  async forgetEvent(keys: readonly string[], event: string): Promise<void> {
    for (const key of keys) {
      const log = (this.logs.get(key) ?? []).filter((entry) => entry.event !== event);
      if (log.length === 0) this.logs.delete(key);
      else this.logs.set(key, log);
    }
  }

  async close(): Promise<void> {
    this.counts.clear();
    this.logs.clear();
  }

  private recent(key: string, windowMs: number, now: number): Array<{ at: number; event: string }> {
    this.longestLogWindowMs = Math.max(this.longestLogWindowMs, windowMs);
    const log = (this.logs.get(key) ?? []).filter(({ at }) => at > now - windowMs);
    if (log.length === 0) this.logs.delete(key);
    return log;
  }

  /**
   * Every 10,000 operations, the windows and logs that have ended go: a log is otherwise cleared
   * only when its own key is read again, and sign-in failures are logged under any user name a
   * stranger tries.
   */
  private tick(now: number): void {
    if (++this.operations % 10_000 !== 0) return;
    for (const [id, entry] of this.counts) if (entry.resetAt <= now) this.counts.delete(id);
    for (const [key, log] of this.logs) if (log.at(-1)!.at <= now - this.longestLogWindowMs) this.logs.delete(key);
  }

  /** Keys holding a log of events (tests). */
  get loggedKeys(): number {
    return this.logs.size;
  }
}

/**
 * How long a counter's command may wait for Redis (connecting, or its answer): a rate limit's
 * check is on every request's way, and one Redis cannot answer is let through (limits.ts).
 */
const REDIS_PATIENCE_MS = 500;
/** After Redis did not answer in time, how long it is not asked again. */
const REDIS_RETRY_MS = 1000;

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

// Over several keys, so not defined with the one-key scripts above: ARGV is now, the window,
// the event's name, then each key's maximum. Answers {0} when logged, else {count, oldest}.
const LOG_EVENT_UNLESS_FULL = `
for i, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', ARGV[1] - ARGV[2])
  local count = redis.call('ZCARD', key)
  if count >= tonumber(ARGV[3 + i]) then
    return {count, redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')[2]}
  end
end
for _, key in ipairs(KEYS) do
  redis.call('ZADD', key, ARGV[1], ARGV[3])
  redis.call('PEXPIRE', key, ARGV[2])
end
return {0}`;

type ScriptedRedis = Redis & {
  heraldIncrement(key: string, ttlMs: string): Promise<number>;
  heraldLogEvent(key: string, now: string, windowMs: string, member: string): Promise<number>;
  heraldRecentEvents(key: string, now: string, windowMs: string): Promise<[number, string]>;
  heraldLogEventUnlessFull(keyCount: number, ...keysThenArgs: string[]): Promise<[number, string?]>;
};

export class RedisCounterStore implements CounterStore {
  private readonly redis: ScriptedRedis;
  private readonly prefix: string;
  private readonly patienceMs: number;
  private unreachableUntil = 0;

  /**
   * `patienceMs`: REDIS_PATIENCE_MS unless told; longer in tests of what is counted, not of a
   * silent Redis, on a busy machine.
   */
  constructor(url: string, prefix = 'herald:counter:', { patienceMs = REDIS_PATIENCE_MS } = {}) {
    this.patienceMs = patienceMs;
    this.redis = connectRedis(url, { commandTimeoutMs: patienceMs }) as ScriptedRedis;
    for (const [name, lua] of Object.entries(SCRIPTS)) this.redis.defineCommand(name, { numberOfKeys: 1, lua });
    // Without numberOfKeys, the number of keys is the call's first argument.
    this.redis.defineCommand('heraldLogEventUnlessFull', { lua: LOG_EVENT_UNLESS_FULL });
    this.prefix = prefix;
  }

  async increment(key: string, windowMs: number, now: number): Promise<WindowCount> {
    const { id, resetAt } = windowOf(key, windowMs, now);
    const count = await this.run(() => this.redis.heraldIncrement(this.prefix + id, String(windowMs + 1000)));
    return { count, resetAt };
  }

  async logEvent(key: string, windowMs: number, now: number): Promise<void> {
    const event = `${now}:${randomUUID()}`;
    await this.run(() => this.redis.heraldLogEvent(this.prefix + key, String(now), String(windowMs), event));
  }

  async recentEvents(key: string, windowMs: number, now: number): Promise<WindowCount> {
    const [count, oldest] = await this.run(() =>
      this.redis.heraldRecentEvents(this.prefix + key, String(now), String(windowMs)),
    );
    return { count, resetAt: count === 0 ? now : Number(oldest) + windowMs };
  }

  async clearEvents(key: string): Promise<void> {
    await this.run(() => this.redis.del(this.prefix + key));
  }

  async logEventUnlessFull(
    keys: ReadonlyArray<readonly [string, number]>,
    windowMs: number,
    now: number,
  ): Promise<{ event: string } | { full: WindowCount }> {
    const event = `${now}:${randomUUID()}`;
    const [count, oldest] = await this.run(() =>
      this.redis.heraldLogEventUnlessFull(
        keys.length,
        ...keys.map(([key]) => this.prefix + key),
        String(now),
        String(windowMs),
        event,
        ...keys.map(([, max]) => String(max)),
      ),
    );
    return count === 0 ? { event } : { full: { count, resetAt: Number(oldest) + windowMs } };
  }

  async forgetEvent(keys: readonly string[], event: string): Promise<void> {
    await this.run(() => Promise.all(keys.map((key) => this.redis.zrem(this.prefix + key, event))));
  }

  async close(): Promise<void> {
    this.redis.disconnect();
  }

  /**
   * `command` once the client can take it, within REDIS_PATIENCE_MS. A Redis that did not
   * answer in time (down, or silent: a partition) is not asked again for a second: every
   * request waiting on it would wait as long (callers let requests through unthrottled).
   */
  private async run<T>(command: () => Promise<T>): Promise<T> {
    if (Date.now() < this.unreachableUntil) throw new Error('Redis is not reachable (it did not answer just now)');
    try {
      await redisReady(this.redis, this.patienceMs);
      return await command();
    } catch (error) {
      this.unreachableUntil = Date.now() + REDIS_RETRY_MS;
      throw error;
    }
  }
}

export function createCounterStore(redisUrl: string | undefined): CounterStore {
  return redisUrl ? new RedisCounterStore(redisUrl) : new MemoryCounterStore();
}
