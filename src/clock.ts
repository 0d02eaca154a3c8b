/**
 * Time is injected (STYLE.md): logic asks a Clock, never Date.now(), so token
 * expiry, rate-limit windows, scheduling and retry backoff are tested without sleeping.
 */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
}

/** An optional epoch-ms time as the API shows times: ISO 8601 UTC, or null. */
export const isoOrNull = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

export const systemClock: Clock = { now: () => Date.now() };

/** A clock that only moves when told to; for tests and benchmarks. */
export class ManualClock implements Clock {
  private current: number;
  constructor(start: number | Date = Date.UTC(2026, 0, 1)) {
    this.current = typeof start === 'number' ? start : start.getTime();
  }
  now(): number {
    return this.current;
  }
  advance(ms: number): void {
    this.current += ms;
  }
  set(ms: number): void {
    this.current = ms;
  }
}
