import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import { Type } from 'typebox';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { AppContext } from '../context.ts';
import { SESSION_COOKIE, SESSION_TTL_MS, closeSession, csrfTokenFor, openSession } from '../auth/console-sessions.ts';
import { signIn } from '../auth/credentials.ts';
import { SignInFields } from '../auth/schemas.ts';
import { LoginThrottle } from '../auth/throttle.ts';
import { AppError, consoleSessionEnded } from '../errors.ts';
import { errorResponses } from '../http/schemas.ts';

/** Where `npm ci` (the prepare script) builds the front end in web/ to. */
const BUILT = fileURLToPath(new URL('../../web/dist/', import.meta.url));

/**
 * The page's scripts, styles and calls come from this origin only, and no inline script runs,
 * so markup that slipped into a contact's field or a reason cannot execute.
 */
const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'self'",
].join('; ');

const SessionBody = Type.Object({
  userName: Type.String(),
  timeZoneOffset: Type.String(),
  locale: Type.String(),
  csrfToken: Type.String({ description: 'Send it as X-CSRF-Token with every change made under the session.' }),
});

const account = { auth: 'account' } as const;
const tags = ['console'];

/**
 * The web console (issue: "A web console for each account"): its sign-in, which puts a
 * session in an HttpOnly, SameSite=Strict cookie that every account route accepts in place of
 * a bearer token (auth/bearer.ts), and the front end built from web/, served as static files.
 */
export async function consoleRoutes(app: FastifyInstance, ctx: AppContext): Promise<void> {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const throttle = new LoginThrottle(ctx.counters, ctx.clock);
  const cookie = {
    httpOnly: true,
    secure: ctx.config.publicUrl.startsWith('https:'),
    sameSite: 'strict',
    path: '/',
  } as const;
  const sessionBody = (secret: string, a: { userName: string; timeZoneOffset: string; locale: string }) => ({
    userName: a.userName,
    timeZoneOffset: a.timeZoneOffset,
    locale: a.locale,
    csrfToken: csrfTokenFor(secret),
  });

  r.post(
    '/console/session',
    {
      schema: {
        tags,
        summary: 'Sign in to the console: the /token credentials and throttle; the session goes in an HttpOnly cookie',
        body: Type.Object(SignInFields),
        response: { 200: SessionBody, ...errorResponses(400, 401, 413, 415, 429) },
      },
    },
    async (request, reply) => {
      const signedIn = await signIn(ctx.db, throttle, request.body, request);
      const secret = await openSession(ctx.db, signedIn, ctx.clock.now());
      reply.setCookie(SESSION_COOKIE, secret, { ...cookie, maxAge: SESSION_TTL_MS / 1000 });
      reply.header('cache-control', 'no-store');
      return sessionBody(secret, {
        userName: signedIn.user_name,
        timeZoneOffset: signedIn.time_zone_offset,
        locale: signedIn.locale,
      });
    },
  );

  r.get(
    '/console/session',
    {
      config: { ...account, scope: [] },
      schema: {
        tags,
        summary: 'The signed-in account and the CSRF token of its console session',
        response: { 200: SessionBody, ...errorResponses(401) },
      },
    },
    async (request) => {
      if (request.consoleSession === null) throw consoleSessionEnded();
      return sessionBody(request.consoleSession, request.account);
    },
  );

  r.delete(
    '/console/session',
    {
      config: { ...account, scope: [] },
      schema: { tags, summary: 'Sign out of the console', response: errorResponses(401, 403) },
    },
    async (request, reply) => {
      if (request.consoleSession !== null) await closeSession(ctx.db, request.consoleSession);
      reply.clearCookie(SESSION_COOKIE, cookie);
      // What the browser kept of this origin before no-store was sent goes with the session.
      reply.header('clear-site-data', '"cache"');
      return reply.code(204).send();
    },
  );

  // biome-ignore lint/nursery/noMisusedPromises: Fastify's register takes an async plugin (FastifyPluginAsync).
  await app.register(async (pages) => {
    pages.addHook('onSend', async (_request, reply) => {
      reply.header('content-security-policy', CONTENT_SECURITY_POLICY);
      reply.header('x-content-type-options', 'nosniff');
      reply.header('referrer-policy', 'same-origin');
    });
    const built = existsSync(`${BUILT}index.html`);
    if (built) {
      // Vite names every asset by its content's hash, so a file never changes under its name.
      await pages.register(fastifyStatic, {
        root: `${BUILT}assets`,
        prefix: '/console/assets/',
        immutable: true,
        maxAge: '365d',
        index: false,
      });
      // The console's pages name the icon (web/index.html); a browser asks every other page's
      // origin for /favicon.ico, and is given the same SVG under its own type.
      const icon = async (_request: unknown, reply: FastifyReply) =>
        reply.sendFile('favicon.svg', BUILT, { maxAge: '1d' });
      pages.get('/console/favicon.svg', { schema: { hide: true } }, icon);
      pages.get('/favicon.ico', { schema: { hide: true } }, icon);
    }
    // Every other path under /console is a page of the front end's router.
    const page = async (_request: unknown, reply: FastifyReply) => {
      if (!built) throw new AppError(503, 'The console is not built: `npm ci` builds it (or `npm run build:console`).');
      return reply.header('cache-control', 'no-cache').sendFile('index.html', BUILT, { cacheControl: false });
    };
    pages.get('/console', { schema: { hide: true } }, page);
    pages.get('/console/*', { schema: { hide: true } }, page);
  });
}
