const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

/**
 * The wait after each failed attempt, Standard Webhooks' example schedule ("Deliverability
 * and reliability"): the first attempt is immediate, then 5 s, 5 min, 30 min, 2 h, 5 h,
 * 10 h, 14 h, 20 h and 24 h; ten attempts over about three days (75.6 h), so a receiver that
 * is down over a weekend still gets its events. Without the jitter the spec suggests: the
 * schedule stays a pure function of the attempt, and the per-host limit on posts in flight
 * (deliver.ts) already keeps a burst of retries from landing on a receiver at once.
 */
export const RETRY_DELAYS_MS = [
  5 * SECOND,
  5 * MINUTE,
  30 * MINUTE,
  2 * HOUR,
  5 * HOUR,
  10 * HOUR,
  14 * HOUR,
  20 * HOUR,
  24 * HOUR,
];

/** A Retry-After may postpone an attempt by at most this, so one header cannot park an event for ever. */
const MAX_RETRY_AFTER_MS = 24 * HOUR;

/** The wait after `attempts` failed attempts, or undefined once the schedule is spent. */
export function retryDelayMs(attempts: number): number | undefined {
  return RETRY_DELAYS_MS[attempts - 1];
}

/** The instant a Retry-After header names (RFC 9110 §10.2.3: delay-seconds or an HTTP-date). */
export function retryAfterAt(value: string | undefined, now: number): number | undefined {
  if (value === undefined) return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return now + Number(trimmed) * SECOND;
  const date = Date.parse(trimmed);
  return Number.isNaN(date) ? undefined : date;
}

/**
 * When to try again after `attempts` failed attempts: the schedule's time, or the
 * receiver's Retry-After when that is later; undefined when no attempt is left.
 */
export function nextAttemptAt(attempts: number, now: number, retryAfter?: string): number | undefined {
  const delay = retryDelayMs(attempts);
  if (delay === undefined) return undefined;
  const asked = Math.min(retryAfterAt(retryAfter, now) ?? now, now + MAX_RETRY_AFTER_MS);
  return Math.max(now + delay, asked);
}
