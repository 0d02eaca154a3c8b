import type { Clock } from '../clock.ts';
import { AppError } from '../errors.ts';
import type { Log } from '../log.ts';
import { clientGroup } from '../ratelimit/client-address.ts';
import type { CounterStore } from '../ratelimit/counters.ts';
import { FailureThrottle } from '../ratelimit/failures.ts';

/**
 * Credential guessing at POST /token and the console's sign-in, counted three ways over 15
 * minutes: per user name and client (5), so a guesser locks out only itself and the owner
 * still signs in from elsewhere; per user name across every client (100), the ceiling for a
 * guesser spread over many addresses, which then locks the name for everyone; and per client
 * across user names (20), against one client trying many accounts. A client is an IPv4
 * address or an IPv6 /64 (client-address.ts); behind a reverse proxy every request comes from
 * the proxy unless TRUST_PROXY takes the client from X-Forwarded-For.
 */
export const LOGIN_WINDOW_MS = 15 * 60_000;
export const MAX_FAILURES_PER_USER_AND_CLIENT = 5;
export const MAX_FAILURES_PER_USER = 100;
export const MAX_FAILURES_PER_CLIENT = 20;

/** Guesses at a credential, sign-in's or a key's, over the same window. */
const guesses = (counters: CounterStore, clock: Clock, message: string) =>
  new FailureThrottle({ counters, clock }, { windowMs: LOGIN_WINDOW_MS, message });

/**
 * A client's failures of one credential, counted apart from the other's: an integration left
 * with a revoked key must not lock the people behind the same address out of signing in.
 */
const clientKey = (credential: 'login' | 'api-key', client: string) => `${credential}:client:${client}`;

// The client first: it holds no space, so the key reads back unambiguously whatever the name holds.
const pairKey = (user: string, client: string) => `login:client-user:${client} ${user}`;

function keys(userName: string, address: string): Array<[string, number]> {
  const user = userName.trim().toLowerCase();
  const client = clientGroup(address);
  return [
    [pairKey(user, client), MAX_FAILURES_PER_USER_AND_CLIENT],
    [`login:user:${user}`, MAX_FAILURES_PER_USER],
    [clientKey('login', client), MAX_FAILURES_PER_CLIENT],
  ];
}

export class LoginThrottle {
  private readonly failures: FailureThrottle;
  constructor(counters: CounterStore, clock: Clock) {
    this.failures = guesses(counters, clock, 'Too many failed sign-in attempts; try again later.');
  }

  /**
   * One sign-in attempt: 429 while the user name from this client, the user name or the client
   * has used up its failures; else counted as a failure of all three until it `succeeded`, which
   * also forgets the name's failures from this client. Its count across clients stays: an owner
   * signing in between guesses must not reset the ceiling for the guesser.
   *
   * A counter store that cannot be reached lets the attempt through unthrottled (logged), as it
   * lets requests past the rate limits and API keys past their throttle (operations.md, Redis).
   */
  async attempt(userName: string, address: string, log: Pick<Log, 'warn'>): Promise<SignInAttempt> {
    const counted = keys(userName, address);
    let attempt: { succeeded(): Promise<void> };
    try {
      attempt = await this.failures.attempt(counted);
    } catch (error) {
      if (error instanceof AppError) throw error;
      log.warn({ err: error }, 'sign-in throttle counter store unreachable; attempt unthrottled');
      return { succeeded: async () => {} };
    }
    return {
      // A store lost since the attempt was counted leaves it counted as a failure: the sign-in
      // itself succeeded.
      succeeded: async () => {
        try {
          await attempt.succeeded();
          await this.failures.clear(counted[0][0]);
        } catch (error) {
          log.warn({ err: error }, 'sign-in throttle counter store unreachable; success not recorded');
        }
      },
    };
  }
}

/** A sign-in attempt under way, counted as failed until it succeeds. */
export interface SignInAttempt {
  succeeded(): Promise<void>;
}

/**
 * API keys refused (unknown, revoked, expired) per client, 20 in any 15 minutes as for
 * sign-ins, so a client cannot make every request a read of the database nor guess keys at
 * full speed. A key has no user name to count under, and a key that works never clears the
 * count: a guesser holding one valid key must not reset its own ceiling. Checked before the
 * key is looked up, so a throttled client is refused even a valid key, as a sign-in is.
 */
export const MAX_KEY_FAILURES_PER_CLIENT = 20;

export class ApiKeyThrottle {
  private readonly failures: FailureThrottle;
  constructor(counters: CounterStore, clock: Clock) {
    this.failures = guesses(counters, clock, 'Too many invalid API keys from this client; try again later.');
  }

  /** Throws 429 while the client has used up its failures. */
  async check(address: string): Promise<void> {
    await this.failures.check([[clientKey('api-key', clientGroup(address)), MAX_KEY_FAILURES_PER_CLIENT]]);
  }

  /**
   * A key about to be looked up, counted as refused in the same step as the check (429 when the
   * client has used up its failures), so keys sent at once are held to the same count;
   * `succeeded` takes the count back for a key that was found.
   */
  attempt(address: string): Promise<{ succeeded(): Promise<void> }> {
    return this.failures.attempt([[clientKey('api-key', clientGroup(address)), MAX_KEY_FAILURES_PER_CLIENT]]);
  }

  async recordFailure(address: string): Promise<void> {
    await this.failures.recordFailure([clientKey('api-key', clientGroup(address))]);
  }
}
