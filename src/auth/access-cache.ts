import type { Clock } from '../clock.ts';
import type { KnownApiKey } from './api-keys.ts';
import type { TokenSubject } from './tokens.ts';

/**
 * How long an account read is trusted. A revocation (password change, private-token
 * rotation, account deletion) made by another process, the CLI included, reaches this one
 * within this time; one made through this process's own API reaches it at once (forget).
 */
export const ACCOUNT_TTL_MS = 1000;

/** Entries kept at most, per map: a few MiB, however many tokens clients mint. */
const MAX_ENTRIES = 10_000;

export interface CachedAccount {
  id: string;
  user_name: string;
  token_version: number;
  time_zone_offset: string;
  locale: string;
  rate_limits: string | null;
  inbound_sms_webhook_url: string | null;
  verify: string | null;
  smart_encoding: boolean | number;
  quiet_hours: string | null;
}

/**
 * What the bearer check remembers between requests. jose's HS256 verification costs about
 * 22 µs of CPU and the account read a database round trip, against about 11 µs for a whole
 * bare Fastify request here: every authenticated request paid both. A verified token is
 * remembered by its SHA-256 until it expires (its signature cannot change); the account it
 * names is re-read at most every ACCOUNT_TTL_MS, so a token whose version moved on stops
 * working within that time.
 */
export class AccessCache {
  private readonly clock: Clock;
  private readonly tokens = new Map<string, TokenSubject>();
  private readonly accounts: ReadThrough<CachedAccount>;
  private readonly apiKeys: ReadThrough<KnownApiKey>;

  constructor(clock: Clock) {
    this.clock = clock;
    this.accounts = new ReadThrough(clock);
    this.apiKeys = new ReadThrough(clock);
  }

  /** The token's subject if it was verified before and has not expired since. */
  verifiedToken(tokenHash: string): TokenSubject | undefined {
    const subject = this.tokens.get(tokenHash);
    if (subject && subject.expiresAt > this.clock.now()) return subject;
    if (subject) this.tokens.delete(tokenHash);
    return undefined;
  }

  rememberToken(tokenHash: string, subject: TokenSubject): void {
    remember(this.tokens, tokenHash, subject);
  }

  /** The account as read less than ACCOUNT_TTL_MS ago, else as `read` finds it (ReadThrough). */
  accountOr(id: string, read: () => Promise<CachedAccount | undefined>): Promise<CachedAccount | undefined> {
    return this.accounts.get(id, read);
  }

  /**
   * The API key of this hash as read less than ACCOUNT_TTL_MS ago, else as `read` finds it: a
   * key revoked by another process stops working within that time, as a token whose account
   * moved on does.
   */
  apiKeyOr(keyHash: string, read: () => Promise<KnownApiKey | undefined>): Promise<KnownApiKey | undefined> {
    return this.apiKeys.get(keyHash, read);
  }

  /** Whether the API key of this hash was found within `withinMs`, and not forgotten since. */
  apiKeyFoundWithin(keyHash: string, withinMs: number): boolean {
    return this.apiKeys.foundWithin(keyHash, withinMs);
  }

  /** This process revoked the key: the next request with it reads the database, and finds it gone. */
  forgetApiKey(keyHash: string): void {
    this.apiKeys.forget(keyHash);
  }

  /** This process changed the account: the next request reads it again. */
  forget(accountId: string): void {
    this.accounts.forget(accountId);
  }
}

/**
 * Rows read from the database and trusted for ACCOUNT_TTL_MS. The requests that come while a
 * row is being read wait for that read: once a second, every request in flight for an account
 * found its row stale at the same moment and read it, about 20 reads where one would do.
 */
class ReadThrough<V> {
  private readonly clock: Clock;
  private readonly entries = new Map<string, { value: V; readAt: number }>();
  private readonly reads = new Map<string, Promise<V | undefined>>();

  constructor(clock: Clock) {
    this.clock = clock;
  }

  get(key: string, read: () => Promise<V | undefined>): Promise<V | undefined> {
    const entry = this.entries.get(key);
    if (entry && this.clock.now() - entry.readAt < ACCOUNT_TTL_MS) return Promise.resolve(entry.value);
    const pending = this.reads.get(key);
    if (pending !== undefined) return pending;
    const reading = read()
      .then((value) => {
        // Forgotten while it was read (forget): the row may be from before the change.
        if (value !== undefined && this.reads.get(key) === reading)
          remember(this.entries, key, { value, readAt: this.clock.now() });
        return value;
      })
      .finally(() => {
        if (this.reads.get(key) === reading) this.reads.delete(key);
      });
    this.reads.set(key, reading);
    return reading;
  }

  /** Whether a value was found for the key within `withinMs` (entries outlive their trust). */
  foundWithin(key: string, withinMs: number): boolean {
    const entry = this.entries.get(key);
    return entry !== undefined && this.clock.now() - entry.readAt < withinMs;
  }

  forget(key: string): void {
    this.entries.delete(key);
    this.reads.delete(key);
  }
}

// Map keeps insertion order: the oldest entry goes first once the map is full.
function remember<V>(map: Map<string, V>, key: string, value: V): void {
  map.delete(key);
  if (map.size >= MAX_ENTRIES) map.delete(map.keys().next().value!);
  map.set(key, value);
}
