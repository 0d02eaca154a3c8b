import { Type } from 'typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { AppContext } from '../context.ts';
import { notFound } from '../errors.ts';
import { errorResponses, Uuid } from '../http/schemas.ts';
import { idempotent } from '../http/idempotency.ts';
import { clientGroup } from '../ratelimit/client-address.ts';
import { FailureThrottle } from '../ratelimit/failures.ts';
import { followLink } from './clicks.ts';
import { listLandingPages, postLandingPage, prepareLandingPage } from './landing-pages.ts';
import {
  CodeParams,
  LandingPageBody,
  LandingPagePage,
  LandingPageQuery,
  LandingPageRequest,
  ShortenerDomainBody,
  ShortenerDomainRequest,
} from './schemas.ts';
import { addShortenerDomain, listShortenerDomains, SERVICE_LINK_PATH, shortenerAccount } from './shortener.ts';

const sms = { auth: 'account', rateLimitGroup: 'sms' } as const;

export const MISS_WINDOW_MS = 15 * 60_000;
export const MAX_MISSES_PER_ADDRESS = 300;
const tags = ['links'];

/**
 * Landing pages, short links and the hosts that shorten them (ARCHITECTURE.md; docs/sms.md,
 * "Landing pages and short links"): route table first, handlers only call the service.
 */
export function linkRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const serviceHost = new URL(ctx.config.publicUrl).hostname;

  r.post(
    '/landing-pages',
    {
      config: { ...sms, scope: 'contacts:write' },
      schema: {
        tags,
        summary: 'Create a landing page: the page an SMS with its landingPageId links to',
        body: LandingPageRequest,
        response: { 201: LandingPageBody, ...errorResponses(400, 401, 409, 415, 429) },
      },
    },
    async (request, reply) =>
      idempotent(request, reply, ctx, request.account.id, postLandingPage, () =>
        prepareLandingPage(request.account.id, request.body, ctx.clock.now()),
      ),
  );

  r.get(
    '/landing-pages',
    {
      config: { ...sms, scope: 'read' },
      schema: {
        tags,
        summary: "The account's landing pages, oldest first, a page at a time",
        querystring: LandingPageQuery,
        response: { 200: LandingPagePage, ...errorResponses(400, 401, 429) },
      },
    },
    async (request) =>
      listLandingPages(ctx.db, request.account.id, {
        limit: Number(request.query.limit ?? 100),
        cursor: request.query.cursor,
      }),
  );

  // Short links are opened by anyone holding the text: no token, and every answer the same
  // for a code that is not one and a code of another account. Only misses are counted, per
  // client (an IPv4 address or an IPv6 /64, client-address.ts): opening real links is never
  // slowed (a carrier's NAT puts thousands of handsets behind one address), while guessing
  // codes stops after MAX_MISSES_PER_ADDRESS.
  const misses = new FailureThrottle(ctx, {
    windowMs: MISS_WINDOW_MS,
    message: 'Too many unknown links opened from this address; try again later.',
  });
  const follow = async (request: FastifyRequest, reply: FastifyReply, code: string, accountId: string | null) => {
    const missKey = `link-miss:addr:${clientGroup(request.ip)}`;
    await misses.check([[missKey, MAX_MISSES_PER_ADDRESS]]);
    // A HEAD is a client checking the link (a previewer, a monitor), not a person opening it.
    const url = await followLink(ctx.db, {
      code,
      accountId,
      at: ctx.clock.now(),
      userAgent: request.headers['user-agent'],
      record: request.method === 'GET',
    });
    if (url === undefined) {
      await misses.recordFailure([missKey]);
      throw notFound('The link');
    }
    // no-store: each opening reaches the service and is counted.
    return reply.header('cache-control', 'no-store').redirect(url, 302);
  };
  // On a shortener host, only that host's account's links.
  const hostAccount = async (request: FastifyRequest) => {
    const host = request.hostname.toLowerCase();
    return host === serviceHost ? undefined : shortenerAccount(ctx.db, host);
  };

  r.get(
    `${SERVICE_LINK_PATH}/:code`,
    {
      schema: {
        tags,
        summary:
          'Open a short link: 302 to its landing page, the click recorded; 404 for a code that is not one ' +
          "(on a shortener host, not that host's account's)",
        params: CodeParams,
        response: errorResponses(404),
      },
    },
    async (request, reply) => follow(request, reply, request.params.code, (await hostAccount(request)) ?? null),
  );

  // `/<code>` on a registered shortener host. On any other host the path is no route at all:
  // the request goes to the 404 handler before anything else of the route runs.
  const shortenerHosts = new WeakMap<FastifyRequest, string>();
  r.get(
    '/:code',
    {
      schema: { hide: true, params: CodeParams },
      onRequest: async (request, reply) => {
        const accountId = await hostAccount(request);
        if (accountId === undefined) return reply.callNotFound();
        shortenerHosts.set(request, accountId);
      },
    },
    async (request, reply) => follow(request, reply, request.params.code, shortenerHosts.get(request)!),
  );

  if (!ctx.config.adminToken) return;
  const admin = { auth: 'admin' as const };
  const AccountParams = Type.Object({ accountId: Uuid() });

  r.post(
    '/admin/accounts/:accountId/shortener-domains',
    {
      config: admin,
      schema: {
        tags: ['admin'],
        summary:
          'Register a custom shortener host for an account: its SMS may use shortner.shortnerUrl ' +
          "https://<domain>, and the host answers /<code> for the account's links",
        params: AccountParams,
        body: ShortenerDomainRequest,
        response: { 201: ShortenerDomainBody, ...errorResponses(400, 401, 404, 409) },
      },
    },
    async (request, reply) =>
      reply.code(201).send(
        await addShortenerDomain(ctx.db, ctx.clock, {
          accountId: request.params.accountId,
          domain: request.body.domain,
          serviceHost,
        }),
      ),
  );

  r.get(
    '/admin/accounts/:accountId/shortener-domains',
    {
      config: admin,
      schema: {
        tags: ['admin'],
        summary: "An account's shortener domains",
        params: AccountParams,
        response: { 200: Type.Object({ shortenerDomains: Type.Array(Type.String()) }), ...errorResponses(401) },
      },
    },
    async (request) => ({
      shortenerDomains: await listShortenerDomains(ctx.db, request.params.accountId),
    }),
  );
}
