import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AppContext } from '../context.ts';
import { adminUnauthorized, consoleSessionEnded, csrfRefused, invalidToken, missingToken } from '../errors.ts';
import { SESSION_COOKIE, csrfTokenFor, findSession } from './console-sessions.ts';
import { effectiveRateLimits, enforceRateLimit, type RateLimitGroup, type RateLimits } from '../ratelimit/limits.ts';
import { type AccessCache, tokenHash, type CachedAccount } from './access-cache.ts';
import { verifyAccessToken, type TokenSubject } from './tokens.ts';

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
  }
  interface FastifyContextConfig {
    /** Who may call the route: an account's bearer token, the operator's ADMIN_TOKEN, or anyone. */
    auth?: 'account' | 'admin';
    /** The rate-limit group an account route counts against. */
    rateLimitGroup?: RateLimitGroup;
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
 * process within a second.
 */
export function registerAuthentication(app: FastifyInstance, ctx: AppContext, cache: AccessCache): void {
  app.decorateRequest('account', null as unknown as AuthenticatedAccount);
  app.decorateRequest('consoleSession', null);

  async function subjectOf(token: string): Promise<TokenSubject> {
    const hash = tokenHash(token);
    const known = cache.verifiedToken(hash);
    if (known) return known;
    const subject = await verifyAccessToken(ctx.jwtKey, token, ctx.clock.now());
    cache.rememberToken(hash, subject);
    return subject;
  }

  async function accountOf(id: string): Promise<CachedAccount | undefined> {
    const known = cache.account(id);
    if (known) return known;
    const row = await ctx.database.reads
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
      .executeTakeFirst();
    if (row) cache.rememberAccount(row);
    return row;
  }

  async function consoleSubjectOf(request: FastifyRequest): Promise<Omit<TokenSubject, 'expiresAt'>> {
    const secret = request.cookies[SESSION_COOKIE];
    if (secret === undefined) throw missingToken();
    const session = await findSession(ctx.database.reads, secret, ctx.clock.now());
    if (!session) throw consoleSessionEnded();
    if (!SAFE_METHODS.has(request.method)) {
      const given = headerValue(request.headers['x-csrf-token']);
      if (given === undefined || !sameSecret(given, csrfTokenFor(secret))) throw csrfRefused();
    }
    request.consoleSession = secret;
    return session;
  }

  app.addHook('onRequest', async (request, reply) => {
    const { auth, rateLimitGroup } = request.routeOptions.config;
    if (auth === 'admin') {
      const token = bearerToken(request);
      if (!token || !ctx.config.adminToken || !sameSecret(token, ctx.config.adminToken)) throw adminUnauthorized();
      return;
    }
    if (auth !== 'account') return;
    const token = bearerToken(request);
    const subject = token === undefined ? await consoleSubjectOf(request) : await subjectOf(token);
    const row = await accountOf(subject.accountId);
    if (!row) throw invalidToken('its account no longer exists');
    if (row.token_version !== subject.tokenVersion) {
      throw token === undefined
        ? consoleSessionEnded()
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
