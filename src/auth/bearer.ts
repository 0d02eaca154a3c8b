import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AppContext } from '../context.ts';
import {
  AppError,
  adminUnauthorized,
  consoleSessionEnded,
  csrfRefused,
  invalidApiKey,
  invalidToken,
  missingToken,
  scopeRefused,
} from '../errors.ts';
import { SESSION_COOKIE, csrfTokenFor, findSession } from './console-sessions.ts';
import { effectiveRateLimits, enforceRateLimit, type RateLimitGroup, type RateLimits } from '../ratelimit/limits.ts';
import type { AccessCache, CachedAccount } from './access-cache.ts';
import { tokenHash } from './token-hash.ts';
import { verifyAccessToken, type TokenSubject } from './tokens.ts';
import { ApiKeyThrottle, LOGIN_WINDOW_MS } from './throttle.ts';
import {
  KEY_PREFIX,
  LAST_USED_EVERY_MS,
  apiKeyHash,
  findApiKey,
  hasApiKeyShape,
  recordApiKeyUse,
  scopesOf,
  type KnownApiKey,
  type RouteScope,
} from './api-keys.ts';

/** The account a bearer token speaks for, as every module handler sees it. */
export interface AuthenticatedAccount {
  id: string;
  userName: string;
  timeZoneOffset: string;
  locale: string;
  rateLimits: RateLimits;
  /** Where its messages from handsets are posted (PATCH /account). */
  inboundSmsWebhookUrl: string | null;
  /** Verify's fraud guard as stored (PATCH /account), JSON (accounts/verify-settings.ts); null: the defaults. */
  verifySettings: string | null;
  /** Smart encoding of its SMS texts (PATCH /account). */
  smartEncoding: boolean;
  /** Quiet hours for batch SMS as stored (PATCH /account), JSON (accounts/quiet-hours.ts); null: off. */
  quietHours: string | null;
}

declare module 'fastify' {
  interface FastifyRequest {
    account: AuthenticatedAccount;
    /** The console session's secret when the request came with its cookie rather than a bearer token. */
    consoleSession: string | null;
    /** The API key the request came with, or null: an access token or the console's session. */
    apiKey: KnownApiKey | null;
  }
  interface FastifyContextConfig {
    /** Who may call the route: an account's bearer token, the operator's ADMIN_TOKEN, or anyone. */
    auth?: 'account' | 'admin';
    /** The rate-limit group an account route counts against. */
    rateLimitGroup?: RateLimitGroup;
    /**
     * The scope that lets an API key call an account route (api-keys.ts, ARCHITECTURE.md's
     * table); required with `auth: 'account'`. Access tokens and console sessions hold every scope.
     */
    scope?: RouteScope;
  }
}

function bearerToken(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization;
  if (header === undefined) return undefined;
  const match = /^Bearer +([^\s]+) *$/i.exec(header);
  if (!match) throw invalidToken('the Authorization header is not "Bearer <token>"');
  return match[1];
}

const headerValue = (value: string | string[] | undefined) => (Array.isArray(value) ? value[0] : value);

function sameSecret(given: string, expected: string): boolean {
  const digest = (s: string) => createHash('sha256').update(s).digest();
  return timingSafeEqual(digest(given), digest(expected));
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * One onRequest hook authenticates every route by its `config.auth`, then counts account
 * routes against their rate-limit group. It runs before the body is read, so a caller
 * without a valid token or over its limit costs no parsing. An account route takes either a
 * bearer token or the console's session cookie (console-sessions.ts): the console is one more
 * client of the same routes; under the cookie, a change needs the session's CSRF token too.
 * Verified tokens and account reads are remembered (access-cache.ts); revocations reach every
 * process within a second. A bearer token that begins `hk_` is an API key (api-keys.ts): its
 * account's, limited to the scopes that the route's `config.scope` names.
 */
export function registerAuthentication(app: FastifyInstance, ctx: AppContext, cache: AccessCache): void {
  app.decorateRequest('account', null as unknown as AuthenticatedAccount);
  app.decorateRequest('consoleSession', null);
  app.decorateRequest('apiKey', null);

  // A route a key could call by mistake, or never, because its scope was forgotten: the start stops.
  app.addHook('onRoute', (route) => {
    if (route.config?.auth === 'account' && route.config.scope === undefined) {
      throw new Error(`${route.method} ${route.url} is an account route with no scope in its config`);
    }
  });

  const keyFailures = new ApiKeyThrottle(ctx.counters, ctx.clock);
  /** Requests checking each key hash now. */
  const keysUnderCheck = new Map<string, number>();

  /**
   * Refused keys count against their client (throttle.ts), and past its limit the client's keys
   * are refused (429) before they are looked up. A bearer not even shaped as a key costs nothing:
   * refused at once, uncounted. An unreachable counter store lets keys be checked unthrottled,
   * as it lets requests past the rate limits (limits.ts): every integration refused while Redis
   * restarts would be the worse failure.
   */
  async function throttledApiKeyOf(key: string, request: FastifyRequest): Promise<KnownApiKey> {
    if (!hasApiKeyShape(key)) throw invalidApiKey('it is not the shape of a key (hk_ and 43 base64url characters)');
    // A key found within the throttle's window, or one another request is checking now, is only
    // checked against the client's count: a burst of one key, each counted as a failure ahead of
    // the read they share, would refuse a valid key once it outnumbered the client's failures.
    const hash = apiKeyHash(key);
    const known = cache.apiKeyFoundWithin(hash, LOGIN_WINDOW_MS) || keysUnderCheck.has(hash);
    keysUnderCheck.set(hash, (keysUnderCheck.get(hash) ?? 0) + 1);
    try {
      return await countedApiKeyOf(key, request, known);
    } finally {
      const left = keysUnderCheck.get(hash)! - 1;
      if (left === 0) keysUnderCheck.delete(hash);
      else keysUnderCheck.set(hash, left);
    }
  }

  async function countedApiKeyOf(key: string, request: FastifyRequest, known: boolean): Promise<KnownApiKey> {
    const unlessStoreDown = async (counting: Promise<void>) => {
      try {
        await counting;
      } catch (error) {
        if (error instanceof AppError) throw error;
        request.log.warn({ err: error }, 'API-key throttle counter store unreachable; key checked unthrottled');
      }
    };
    let attempt: { succeeded(): Promise<void> } | undefined;
    await unlessStoreDown(
      known
        ? keyFailures.check(request.ip)
        : keyFailures.attempt(request.ip).then((counted) => {
            attempt = counted;
          }),
    );
    try {
      const found = await apiKeyOf(key);
      if (attempt) await unlessStoreDown(attempt.succeeded());
      return found;
    } catch (error) {
      // A key refused (unknown, revoked, expired) counts, the attempt's count kept or, for a key
      // read just before, a failure recorded now; a database that failed does not count.
      const refused = error instanceof AppError;
      if (refused && known) await unlessStoreDown(keyFailures.recordFailure(request.ip));
      if (!refused && attempt) await unlessStoreDown(attempt.succeeded());
      throw error;
    }
  }

  /** The key, still live; its use recorded at most once a minute. */
  async function apiKeyOf(key: string): Promise<KnownApiKey> {
    const hash = apiKeyHash(key);
    const known = await cache.apiKeyOr(hash, () => findApiKey(ctx.database.reads, hash));
    if (!known) throw invalidApiKey('it was revoked or never existed');
    const now = ctx.clock.now();
    if (known.expiresAt !== null && known.expiresAt <= now) throw invalidApiKey('it has expired');
    if (known.lastUsedAt === null || now - known.lastUsedAt >= LAST_USED_EVERY_MS) {
      known.lastUsedAt = now;
      await recordApiKeyUse(ctx.db, known.id, now);
    }
    return known;
  }

  async function subjectOf(token: string): Promise<TokenSubject> {
    const hash = tokenHash(token);
    const known = cache.verifiedToken(hash);
    if (known) return known;
    const subject = await verifyAccessToken(ctx.jwtKey, token, ctx.clock.now());
    cache.rememberToken(hash, subject);
    return subject;
  }

  function accountOf(id: string): Promise<CachedAccount | undefined> {
    return cache.accountOr(id, () =>
      ctx.database.reads
        .selectFrom('accounts')
        .select([
          'id',
          'user_name',
          'token_version',
          'time_zone_offset',
          'locale',
          'rate_limits',
          'inbound_sms_webhook_url',
          'verify',
          'smart_encoding',
          'quiet_hours',
        ])
        .where('id', '=', id)
        .executeTakeFirst(),
    );
  }

  /**
   * A console session that ended (expired, signed out elsewhere, the password changed): the
   * browser is told to drop what it kept of the origin, its cookie and any page cached before
   * no-store was sent, as a sign-out does.
   */
  function sessionEnded(reply: FastifyReply) {
    reply.header('clear-site-data', '"cache", "cookies"');
    return consoleSessionEnded();
  }

  async function consoleSubjectOf(
    request: FastifyRequest,
    reply: FastifyReply,
  ): Promise<Omit<TokenSubject, 'expiresAt'>> {
    const secret = request.cookies[SESSION_COOKIE];
    if (secret === undefined) throw missingToken();
    const session = await findSession(ctx.database.reads, secret, ctx.clock.now());
    if (!session) throw sessionEnded(reply);
    if (!SAFE_METHODS.has(request.method)) {
      const given = headerValue(request.headers['x-csrf-token']);
      if (given === undefined || !sameSecret(given, csrfTokenFor(secret))) throw csrfRefused();
    }
    request.consoleSession = secret;
    return session;
  }

  app.addHook('onRequest', async (request, reply) => {
    const { auth, rateLimitGroup } = request.routeOptions.config;
    // An account's or the operator's reads (a webhook secret, a person's data) are kept in no
    // browser's or proxy's cache: the console's would hold them on disk past its sign-out.
    if (auth !== undefined) reply.header('cache-control', 'no-store');
    if (auth === 'admin') {
      const token = bearerToken(request);
      if (!token || !ctx.config.adminToken || !sameSecret(token, ctx.config.adminToken)) throw adminUnauthorized();
      return;
    }
    if (auth !== 'account') return;
    const token = bearerToken(request);
    if (token?.startsWith(KEY_PREFIX)) {
      request.apiKey = await throttledApiKeyOf(token, request);
      // Checked before the account is read: a key outside its scopes costs nothing more.
      const scopes = scopesOf(request.routeOptions.config.scope ?? []);
      if (!scopes.some((scope) => request.apiKey!.scopes.has(scope))) throw scopeRefused(scopes);
    }
    const subject =
      request.apiKey !== null
        ? { accountId: request.apiKey.accountId, tokenVersion: undefined }
        : token === undefined
          ? await consoleSubjectOf(request, reply)
          : await subjectOf(token);
    const row = await accountOf(subject.accountId);
    if (!row) throw invalidToken('its account no longer exists');
    // A key outlives password changes and private-token rotations: only its revocation ends it.
    if (subject.tokenVersion !== undefined && row.token_version !== subject.tokenVersion) {
      throw token === undefined
        ? sessionEnded(reply)
        : invalidToken('it was revoked by a password change or private-token rotation');
    }
    request.account = {
      id: row.id,
      userName: row.user_name,
      timeZoneOffset: row.time_zone_offset,
      locale: row.locale,
      rateLimits: effectiveRateLimits(row.rate_limits),
      inboundSmsWebhookUrl: row.inbound_sms_webhook_url,
      verifySettings: row.verify,
      smartEncoding: Boolean(row.smart_encoding),
      quietHours: row.quiet_hours,
    };
    if (rateLimitGroup) {
      await enforceRateLimit(request, reply, ctx, row.id, rateLimitGroup, request.account.rateLimits[rateLimitGroup]);
    }
  });
}
