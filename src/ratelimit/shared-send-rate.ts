import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { connectRedis, redisReady } from './redis.ts';
import { BURST_SECONDS, laneRates, LocalSendRate, type SendRate, type SendRateOptions } from './send-rate.ts';

/**
 * Leased tokens unused this long after their lease are dropped. With it, what the processes
 * send in any T seconds is at most what Redis granted in T + 0.1 s: tps × (T + 0.1) plus
 * the buckets' tenth of a second, so tps × (T + 0.2) at the very most, and on average tps.
 */
const LEASE_MS = 100;
/**
 * A lease carries this long of its lane's rate, and no more than the process has waiting:
 * at 1,000 tps a busy process makes about 40 round trips a second, not 1,000. When Redis
 * answers slower than half of it, a lease carries two round trips' worth instead (up to
 * LEASE_MS), so one lease in flight at a time still keeps up with the rate.
 */
const LEASE_SPAN_MS = 25;
/** How much of each new round trip the running average takes in. */
const ROUND_TRIP_WEIGHT = 0.25;
/**
 * How long a lease may wait for Redis to connect before the process falls back to its share.
 * Commands time out after as long.
 */
const REDIS_PATIENCE_MS = 500;
/** Every process calls at least this often (alone when it leases nothing), and is counted for PROCESS_TTL_MS. */
const HEARTBEAT_MS = 5_000;
const PROCESS_TTL_MS = 15_000;
/** While Redis is unreachable, it is tried again this often. */
const RETRY_MS = 1_000;

/**
 * One account's buckets in Redis (KEYS[1], a hash of each lane's tokens and when they were
 * counted) refilled on Redis's own clock (TIME, so the processes' clocks never matter), and
 * the processes drawing on them (KEYS[2], scored by their last call). Leases ARGV[2] tokens
 * of lane ARGV[1]: those there now (a passcode's from its own bucket first, then from the
 * campaigns'), the rest reserved from the lane's bucket, which goes below zero, and usable
 * once it has refilled to zero again: the answer says in how many ms. Reserving rather than
 * refusing makes every call a lease, and the processes wait their turn in the order they
 * asked instead of asking again and again. Answers {tokens, wait ms, processes}. Atomic:
 * one script, one round trip, called by its SHA.
 */
const LEASE_SCRIPT = `
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + tonumber(clock[2]) / 1000
local want = tonumber(ARGV[2])
local rates = { normal = tonumber(ARGV[3]), urgent = tonumber(ARGV[4]) }
local burst = tonumber(ARGV[5])
local stored = redis.call('HMGET', KEYS[1], 'normal', 'urgent', 'at')
local elapsed = math.max(0, now - (tonumber(stored[3]) or now))
local tokens = {}
for i, lane in ipairs({ 'normal', 'urgent' }) do
  local full = 0
  if rates[lane] > 0 then full = math.max(1, rates[lane] * burst) end
  tokens[lane] = math.min(full, (tonumber(stored[i]) or full) + elapsed * rates[lane] / 1000)
end
local lanes = { 'normal' }
if ARGV[1] == 'urgent' then lanes = { 'urgent', 'normal' } end
local granted = 0
for _, lane in ipairs(lanes) do
  local taken = math.min(want - granted, math.floor(math.max(0, tokens[lane])))
  tokens[lane] = tokens[lane] - taken
  granted = granted + taken
end
local wait = 0
if granted < want then
  local own = lanes[1]
  if rates[own] == 0 then own = 'normal' end
  tokens[own] = tokens[own] - (want - granted)
  granted = want
  wait = math.ceil(-tokens[own] * 1000 / rates[own])
end
redis.call('HSET', KEYS[1], 'normal', tostring(tokens.normal), 'urgent', tostring(tokens.urgent), 'at', tostring(now))
redis.call('PEXPIRE', KEYS[1], 60000)
local ttl = tonumber(ARGV[7])
redis.call('ZADD', KEYS[2], now, ARGV[6])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - ttl)
redis.call('PEXPIRE', KEYS[2], ttl)
return { granted, wait, redis.call('ZCARD', KEYS[2]) }`;

type Lane = 'normal' | 'urgent';

type LeasingRedis = Redis & {
  heraldRateLease(
    buckets: string,
    processes: string,
    lane: Lane,
    want: number,
    normalRate: number,
    urgentRate: number,
    burst: number,
    process: string,
    ttlMs: number,
  ): Promise<[number, number, number]>;
};

interface Lease {
  tokens: number;
  /** Monotonic ms from which, and until which, its tokens may be spent. */
  startsAt: number;
  expiresAt: number;
  asking: boolean;
  /** Set while its tokens accrue: calls `ready` when they have. */
  timer: NodeJS.Timeout | undefined;
}

export interface SharedRateLog {
  info(object: object, message: string): void;
  warn(object: object, message: string): void;
}

export interface SharedSendRateOptions extends SendRateOptions {
  redisUrl: string;
  /** The account at the next hop the budget is for, such as host:port:user (never the password). */
  account: string;
  /** Where in Redis the transport's budgets live, such as `herald:smpp-rate:`. */
  keyPrefix: string;
  /** The rate's name in the log, such as "the SMPP submit rate". */
  name: string;
  log: SharedRateLog;
}

/**
 * One account's rate at the next hop (an SMSC, an SMTP relay) shared by every process that sends on
 * it, through Redis: each process leases small batches of tokens from the account's buckets
 * (LEASE_SCRIPT) and spends them locally, so a message costs no round trip. While Redis is
 * unreachable each process falls back to its share, tps divided by the processes Redis last counted
 * (itself included; 1 if it has not reached Redis since it started), logs that, and tries Redis
 * again every second: sending slows down, never stops.
 */
export class SharedSendRate implements SendRate {
  private readonly options: SharedSendRateOptions;
  private readonly redis: LeasingRedis;
  private readonly keys: { buckets: string; processes: string };
  private readonly rates: { normal: number; urgent: number };
  private readonly leases: Record<Lane, Lease>;
  private readonly process = randomUUID();
  private readonly beatTimer: NodeJS.Timeout;
  /** Processes drawing on the budget, as Redis last counted them. */
  private processes = 1;
  private calledAt = -Infinity;
  /** Redis's answer time, averaged over the last leases. */
  private roundTripMs = 0;
  private beating = false;
  /** Set while Redis is unreachable. */
  private fallback: LocalSendRate | undefined;
  private closed = false;

  constructor(options: SharedSendRateOptions) {
    this.options = options;
    this.redis = connectRedis(options.redisUrl, { commandTimeoutMs: REDIS_PATIENCE_MS }) as LeasingRedis;
    this.redis.defineCommand('heraldRateLease', { numberOfKeys: 2, lua: LEASE_SCRIPT });
    // In braces, so that on a Redis Cluster both keys hash to one slot, as a script needs.
    const account = `${options.keyPrefix}{${options.account}}`;
    this.keys = { buckets: account, processes: `${account}:processes` };
    this.rates = laneRates(options.tps, options.urgentShare);
    const lease = (): Lease => ({ tokens: 0, startsAt: 0, expiresAt: 0, asking: false, timer: undefined });
    this.leases = { normal: lease(), urgent: lease() };
    this.beatTimer = setInterval(() => this.beat(), RETRY_MS);
    this.beat();
  }

  take(urgent: boolean, waiting: number): boolean {
    if (this.fallback) return this.fallback.take(urgent);
    const now = this.options.monotonic();
    for (const lease of urgent ? [this.leases.urgent, this.leases.normal] : [this.leases.normal]) {
      if (lease.tokens >= 1 && now >= lease.startsAt && now < lease.expiresAt) {
        lease.tokens -= 1;
        return true;
      }
    }
    this.ask(urgent ? 'urgent' : 'normal', waiting);
    return false;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.beatTimer);
    for (const lease of Object.values(this.leases)) clearTimeout(lease.timer);
    await this.fallback?.close();
    // Counted no longer, so the others' fallback shares are not made smaller by a process gone.
    if (this.redis.status === 'ready') await this.redis.zrem(this.keys.processes, this.process).catch(() => {});
    this.redis.disconnect();
  }

  private ask(lane: Lane, waiting: number): void {
    const lease = this.leases[lane];
    if (lease.asking || lease.timer || this.closed) return;
    lease.asking = true;
    this.lease(lane, Math.max(1, Math.min(waiting, this.leaseSize(lane)))).then(
      ([granted, waitMs]) => {
        lease.asking = false;
        if (this.closed) return;
        lease.tokens = granted;
        lease.startsAt = this.options.monotonic() + waitMs;
        lease.expiresAt = lease.startsAt + LEASE_MS;
        if (waitMs === 0) {
          this.options.ready();
          return;
        }
        lease.timer = setTimeout(() => {
          lease.timer = undefined;
          // Timers keep whole milliseconds and may fire a fraction early: the tokens are due now.
          lease.startsAt = Math.min(lease.startsAt, this.options.monotonic());
          this.options.ready();
        }, waitMs);
      },
      (error: unknown) => {
        lease.asking = false;
        this.fallBack(error);
      },
    );
  }

  private leaseSize(lane: Lane): number {
    const spanMs = Math.min(LEASE_MS, Math.max(LEASE_SPAN_MS, 2 * this.roundTripMs));
    return Math.max(1, Math.floor((this.rates[lane] * spanMs) / 1000));
  }

  private async lease(lane: Lane, want: number): Promise<[number, number]> {
    await redisReady(this.redis, REDIS_PATIENCE_MS);
    const { normal, urgent } = this.rates;
    const askedAt = this.options.monotonic();
    const [granted, waitMs, processes] = await this.redis.heraldRateLease(
      this.keys.buckets,
      this.keys.processes,
      lane,
      want,
      normal,
      urgent,
      BURST_SECONDS,
      this.process,
      PROCESS_TTL_MS,
    );
    this.processes = Math.max(1, processes);
    this.calledAt = this.options.monotonic();
    this.roundTripMs += ROUND_TRIP_WEIGHT * (this.calledAt - askedAt - this.roundTripMs);
    return [granted, waitMs];
  }

  /**
   * Once a second: Redis tried again while it is unreachable, else the process counted if it leased
   * nothing for a while.
   */
  private beat(): void {
    if (this.beating || this.closed) return;
    if (!this.fallback && this.options.monotonic() - this.calledAt < HEARTBEAT_MS) return;
    this.beating = true;
    this.lease('normal', 0)
      .then(
        () => {
          if (!this.fallback || this.closed) return;
          const fallback = this.fallback;
          this.fallback = undefined;
          void fallback.close();
          this.options.log.info(
            { account: this.options.account, processes: this.processes },
            `Redis is back: ${this.options.name} is shared again`,
          );
          this.options.ready();
        },
        (error: unknown) => this.fallBack(error),
      )
      .finally(() => (this.beating = false));
  }

  private fallBack(error: unknown): void {
    if (this.fallback || this.closed) return;
    const tps = this.options.tps / this.processes;
    this.fallback = new LocalSendRate({ ...this.options, tps });
    this.options.log.warn(
      { account: this.options.account, error: (error as Error).message, processes: this.processes, tps },
      `Redis is unreachable: ${this.options.name} falls back to this process's share of its rate until it is back`,
    );
    this.options.ready();
  }
}
