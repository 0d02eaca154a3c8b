import type { Clock } from '../clock.ts';
import { tooManyRequests } from '../errors.ts';
import type { CounterStore } from '../ratelimit/counters.ts';

/**
 * Credential guessing at POST /token is throttled twice over: per user name (one account
 * attacked from many addresses) and per client address (many accounts tried from one).
 * The window slides: a key is refused while it has the maximum of failures in the last
 * 15 minutes, until its oldest failure is 15 minutes old, which is the Retry-After given
 * (a clock-aligned window told one caller 30 s and the next 403 s for the same history).
 */
export const LOGIN_WINDOW_MS = 15 * 60_000;
export const MAX_FAILURES_PER_USER = 5;
export const MAX_FAILURES_PER_ADDRESS = 20;

function keys(userName: string, address: string): Array<[string, number]> {
  return [
    [`login:user:${userName.trim().toLowerCase()}`, MAX_FAILURES_PER_USER],
    [`login:addr:${address}`, MAX_FAILURES_PER_ADDRESS],
  ];
}

export class LoginThrottle {
  private readonly counters: CounterStore;
  private readonly clock: Clock;
  constructor(counters: CounterStore, clock: Clock) {
    this.counters = counters;
    this.clock = clock;
  }

  /** Throws 429 while either the user name or the address has used up its failures. */
  async check(userName: string, address: string): Promise<void> {
    const now = this.clock.now();
    for (const [key, max] of keys(userName, address)) {
      const { count, resetAt } = await this.counters.recentEvents(key, LOGIN_WINDOW_MS, now);
      if (count >= max) {
        throw tooManyRequests('Too many failed sign-in attempts; try again later.', (resetAt - now) / 1000);
      }
    }
  }

  async recordFailure(userName: string, address: string): Promise<void> {
    const now = this.clock.now();
    for (const [key] of keys(userName, address)) await this.counters.logEvent(key, LOGIN_WINDOW_MS, now);
  }

  async recordSuccess(userName: string): Promise<void> {
    const [[key]] = keys(userName, '');
    await this.counters.clearEvents(key);
  }
}
