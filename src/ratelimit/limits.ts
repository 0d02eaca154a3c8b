import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Clock } from '../clock.ts';
import { tooManyRequests } from '../errors.ts';
import type { CounterStore, WindowCount } from './counters.ts';

/** Endpoint groups limited separately, so a CRM sync can never starve one-time passcodes. */
export const RATE_LIMIT_GROUPS = ['sms', 'email', 'contacts', 'account', 'verify'] as const;
export type RateLimitGroup = (typeof RATE_LIMIT_GROUPS)[number];
export type RateLimits = Record<RateLimitGroup, number>;

export const RATE_LIMIT_WINDOW_MS = 60_000;

/**
 * Requests per minute per account. SMS is highest because each single-SMS call is one
 * passcode; the contact batch carries up to 1,000 contacts a call, so 1,200 calls a
 * minute already allow 20,000 contacts a second. Operators change them per account.
 */
export const DEFAULT_RATE_LIMITS: RateLimits = { sms: 6000, email: 600, contacts: 1200, account: 600, verify: 6000 };

export function effectiveRateLimits(stored: string | null): RateLimits {
  return { ...DEFAULT_RATE_LIMITS, ...(stored ? (JSON.parse(stored) as Partial<RateLimits>) : {}) };
}

/**
 * Counts the request against the account's limit for the group and sets the
 * RateLimit-* headers (draft-ietf-httpapi-ratelimit-headers); over the limit → 429.
 * If the shared counter store is unreachable the request is let through: a limit is a
 * guard, and refusing every passcode while Redis restarts would be the worse failure.
 */
export async function enforceRateLimit(
  request: FastifyRequest,
  reply: FastifyReply,
  deps: { counters: CounterStore; clock: Clock },
  accountId: string,
  group: RateLimitGroup,
  limit: number,
): Promise<void> {
  const now = deps.clock.now();
  let window: WindowCount;
  try {
    window = await deps.counters.increment(`rate:${accountId}:${group}`, RATE_LIMIT_WINDOW_MS, now);
  } catch (error) {
    request.log.warn({ err: error }, 'rate-limit counter store unreachable; request allowed');
    return;
  }
  const resetSeconds = Math.max(1, Math.ceil((window.resetAt - now) / 1000));
  reply.header('ratelimit-limit', String(limit));
  reply.header('ratelimit-remaining', String(Math.max(0, limit - window.count)));
  reply.header('ratelimit-reset', String(resetSeconds));
  if (window.count > limit) {
    throw tooManyRequests(
      `Rate limit of ${limit} ${group} requests per minute exceeded; retry after ${resetSeconds} s.`,
      resetSeconds,
    );
  }
}
