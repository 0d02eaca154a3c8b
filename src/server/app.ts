import { auditRoutes } from '../audit/routes.ts';
import { registerDatabaseMetrics } from '../db/metrics.ts';
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify';
import cookie from '@fastify/cookie';
import swagger from '@fastify/swagger';
import { JSON_MEDIA_TYPES } from '../http/json.ts';
import swaggerUi from '@fastify/swagger-ui';
import type { AppContext } from '../context.ts';
import { schemaCompilers } from '../http/schema-compilers.ts';
import { registerBoundary } from '../http/boundary.ts';
import { clientErrors, frameworkErrors, registerErrorHandling } from '../http/errors.ts';
import { ANNOTATIONS } from '../http/input.ts';
import { registerMetrics } from '../http/metrics.ts';
import { probeRoutes } from '../http/probes.ts';
import { requestLogging } from '../http/request-log.ts';
import { ErrorBody, errorResponses } from '../http/schemas.ts';
import { registerAuthentication } from '../auth/bearer.ts';
import { AccessCache } from '../auth/access-cache.ts';
import { authRoutes } from '../auth/routes.ts';
import { apiKeyRoutes } from '../auth/api-key-routes.ts';
import { SCOPES, scopesOf } from '../auth/api-keys.ts';
import { accountRoutes } from '../accounts/routes.ts';
import { senderRoutes } from '../senders/routes.ts';
import { webhookRoutes } from '../webhooks/routes.ts';
import { crmRoutes } from '../crm/routes.ts';
import { smsRoutes } from '../sms/routes.ts';
import { verifyRoutes } from '../verify/routes.ts';
import { smsRoutingRoutes } from '../sms/routing/routes.ts';
import { emailRoutes } from '../email/routes.ts';
import { messagingRoutes } from '../messaging/routes.ts';
import { linkRoutes } from '../links/routes.ts';
import { privacyRoutes } from '../privacy/routes.ts';
import { consoleRoutes } from '../console/routes.ts';
import { rememberedRefusals, requestResolver, type Resolver } from '../webhooks/destination.ts';
import { keptUrl } from '../url-password.ts';
import { urlKey } from '../webhooks/url-passwords.ts';
import { registerQueueMetrics } from '../queue/metrics.ts';
import { queueRoutes } from '../queue/routes.ts';

/** What /docs says the API is. */
const API_DESCRIPTION =
  'Access tokens, accounts, the CRM (lists, properties, contact upsert), SMS through the sandbox transport or over ' +
  'SMPP with landing pages, short links, encrypted bodies and replies from handsets, email batches through the ' +
  'sandbox transport or an SMTP relay with campaigns, DKIM, suppressions, tracking and bounces, and signed webhooks.';

/**
 * API keys (POST /api-keys) beside the JWT bearer. OpenAPI 3.0 gives scopes to OAuth 2 alone: a
 * key's are an extension here (`x-scopes`), as is each operation's `x-scope`.
 */
const API_KEY_SCHEME = {
  type: 'http' as const,
  scheme: 'bearer',
  bearerFormat: 'hk_',
  description:
    'An API key (POST /api-keys) as the bearer token: it may call the operations whose `x-scope` lists one ' +
    'of its scopes (docs/api-keys.md).',
  'x-scopes': [...SCOPES],
};

/** Builds the HTTP API on a context; server.ts listens, tests inject. */
export async function buildApp(
  ctx: AppContext,
  options: { logger?: FastifyServerOptions['logger']; resolve?: Resolver } = {},
): Promise<FastifyInstance> {
  const app = Fastify({
    logger: requestLogging(options.logger),
    bodyLimit: ctx.config.bodyLimitBytes,
    trustProxy: ctx.config.trustProxy,
    // verbose: each error carries its schema node, for errorMessage and "did you mean".
    ajv: {
      customOptions: {
        allErrors: true,
        coerceTypes: false,
        removeAdditional: false,
        verbose: true,
        keywords: [...ANNOTATIONS],
      },
    },
    frameworkErrors,
    clientErrorHandler: clientErrors,
    schemaController: { compilersFactory: schemaCompilers() },
  });

  registerErrorHandling(app);
  const destinations = { allowPrivate: ctx.config.webhookAllowPrivate, resolve: options.resolve ?? requestResolver };
  registerBoundary(app, {
    refusal: rememberedRefusals(destinations, () => ctx.clock.now()),
    kept: async (url) => keptUrl(await urlKey(ctx.db, ctx.encryptionKey), url),
  });
  registerMetrics(app, ctx.metrics);
  registerQueueMetrics(ctx.metrics, ctx.db, ctx.clock);
  registerDatabaseMetrics(ctx.metrics, ctx.database);
  const accessCache = new AccessCache(ctx.clock);
  // Before authentication: the console's session comes in a cookie.
  await app.register(cookie);
  registerAuthentication(app, ctx, accessCache);
  app.addSchema(ErrorBody);
  app.addHook('onRoute', (route) => {
    // The spec's samples send their bodies as application/json-patch+json (http/json.ts takes both).
    if (route.schema?.body) route.schema = { ...route.schema, consumes: [...JSON_MEDIA_TYPES] };
    const { auth, scope } = route.config ?? {};
    if (!auth) return;
    if (auth !== 'account' || scope === undefined) {
      route.schema = { ...route.schema, security: [{ bearer: [] }] };
      return;
    }
    // An account route: an access token, or an API key holding one of `x-scope` (none: no key).
    // 403: a key without the scope, or a console session's change without its CSRF token.
    const scopes = scopesOf(scope);
    const response = route.schema?.response as Record<string, unknown> | undefined;
    route.schema = {
      ...route.schema,
      security: scopes.length > 0 ? [{ bearer: [] }, { apiKey: [] }] : [{ bearer: [] }],
      'x-scope': [...scopes],
      ...(response && { response: { ...errorResponses(403), ...response } }),
    } as typeof route.schema;
  });

  await app.register(swagger, {
    openapi: {
      info: { title: 'Herald', version: '0.1.0', description: API_DESCRIPTION },
      components: {
        securitySchemes: {
          bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' },
          apiKey: API_KEY_SCHEME,
        },
      },
    },
    refResolver: { buildLocalReference: (json, _base, _fragment, i) => String(json.$id ?? `def-${i}`) },
  });
  await app.register(swaggerUi, { routePrefix: '/docs' });
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());

  probeRoutes(app, ctx);
  authRoutes(app, ctx);
  apiKeyRoutes(app, ctx, accessCache);
  accountRoutes(app, ctx, accessCache);
  senderRoutes(app, ctx);
  webhookRoutes(app, ctx);
  queueRoutes(app, ctx);
  crmRoutes(app, ctx);
  smsRoutes(app, ctx);
  smsRoutingRoutes(app, ctx);
  verifyRoutes(app, ctx);
  emailRoutes(app, ctx);
  messagingRoutes(app, ctx);
  privacyRoutes(app, ctx);
  auditRoutes(app, ctx);
  await consoleRoutes(app, ctx);
  linkRoutes(app, ctx);

  return app;
}

/**
 * The listener of a `--role worker` process, on WORKER_PORT: the probes and metrics of the
 * API's own, so an orchestrator checks and scrapes a worker as it does an API process.
 */
export function buildWorkerApp(
  ctx: AppContext,
  options: { logger?: FastifyServerOptions['logger'] } = {},
): FastifyInstance {
  const app = Fastify({ logger: requestLogging(options.logger) });
  registerErrorHandling(app);
  registerMetrics(app, ctx.metrics);
  registerQueueMetrics(ctx.metrics, ctx.db, ctx.clock);
  registerDatabaseMetrics(ctx.metrics, ctx.database);
  probeRoutes(app, ctx);
  return app;
}
