import type { Clock } from '../clock.ts';
import type { CounterStore } from '../ratelimit/counters.ts';
import { FailureThrottle } from '../ratelimit/failures.ts';

/**
 * Credential guessing at POST /token is throttled twice over: per user name (one account
 * attacked from many addresses) and per client address (many accounts tried from one).
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
  private readonly failures: FailureThrottle;
  constructor(counters: CounterStore, clock: Clock) {
    this.failures = new FailureThrottle({ counters, clock }, { windowMs: LOGIN_WINDOW_MS, message: 'Too many failed sign-in attempts; try again later.' });
  }

  /** Throws 429 while either the user name or the address has used up its failures. */
  async check(userName: string, address: string): Promise<void> {
    await this.failures.check(keys(userName, address));
  }

  async recordFailure(userName: string, address: string): Promise<void> {
    await this.failures.recordFailure(keys(userName, address).map(([key]) => key));
  }

  async recordSuccess(userName: string): Promise<void> {
    const [[key]] = keys(userName, '');
    await this.failures.clear(key);
  }
}
