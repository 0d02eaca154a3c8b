import type { Clock } from '../clock.ts';
import { tooManyRequests } from '../errors.ts';
import type { CounterStore } from './counters.ts';

/**
 * Failures counted per key over a sliding window, against guessing: a key is refused while it
 * has its maximum of failures in the last `windowMs`, until its oldest failure is that old,
 * which is the Retry-After given (a clock-aligned window told one caller 30 s and the next
 * 403 s for the same history). Only failures count, so a client that succeeds is never slowed.
 */
export class FailureThrottle {
  private readonly counters: CounterStore;
  private readonly clock: Clock;
  private readonly windowMs: number;
  private readonly message: string;

  constructor(deps: { counters: CounterStore; clock: Clock }, options: { windowMs: number; message: string }) {
    this.counters = deps.counters;
    this.clock = deps.clock;
    this.windowMs = options.windowMs;
    this.message = options.message;
  }

  /** Throws 429 while any of the keys has used up its failures (each key with its maximum). */
  async check(keys: ReadonlyArray<readonly [string, number]>): Promise<void> {
    const now = this.clock.now();
    for (const [key, max] of keys) {
      const { count, resetAt } = await this.counters.recentEvents(key, this.windowMs, now);
      if (count >= max) throw tooManyRequests(this.message, (resetAt - now) / 1000);
    }
  }

  /**
   * An attempt counted as a failure of every key before it is made, with the check (429 while a
   * key has used up its failures) in the same step: attempts at once cannot all pass a count that
   * each read before any of them failed, as separate check and recordFailure would let them. The
   * attempt that succeeds is taken back.
   */
  async attempt(keys: ReadonlyArray<readonly [string, number]>): Promise<{ succeeded(): Promise<void> }> {
    const now = this.clock.now();
    const logged = await this.counters.logEventUnlessFull(keys, this.windowMs, now);
    if ('full' in logged) throw tooManyRequests(this.message, (logged.full.resetAt - now) / 1000);
    return {
      succeeded: () =>
        this.counters.forgetEvent(
          keys.map(([key]) => key),
          logged.event,
        ),
    };
  }

  async recordFailure(keys: readonly string[]): Promise<void> {
    const now = this.clock.now();
    for (const key of keys) await this.counters.logEvent(key, this.windowMs, now);
  }

  async clear(key: string): Promise<void> {
    await this.counters.clearEvents(key);
  }
}
