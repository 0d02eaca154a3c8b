import { Type } from 'typebox';
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { AppContext } from '../context.ts';
import { errorResponses, PageCursor, PageLimit, Uuid } from '../http/schemas.ts';
import { idempotent } from '../http/idempotency.ts';
import { notFound } from '../errors.ts';
import { WebhookUrl } from './destination.ts';
import {
  deleteEndpoint,
  ENDPOINT_EVENTS,
  endpointView,
  listEndpoints,
  MAX_ENDPOINTS,
  postEndpoint,
  prepareEndpoint,
} from './endpoints.ts';
import { deliveryView, findDelivery, listDeliveries, postDeliveryRetry } from './outbox.ts';
import { auditBy } from '../audit/entries.ts';
import { PasswordAgain, passwordAgain } from '../auth/password-again.ts';
import { ensureSecret, newSecret, postSecretRotation, secretView } from './secrets.ts';

const Secret = Type.Object({
  secret: Type.String({ description: 'whsec_ and the Base64 key; verify posts with any Standard Webhooks library.' }),
  previousSecretExpiresAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
    description: 'Until then the secret replaced by the last rotation signs too.',
  }),
});

const Delivery = Type.Object({
  id: Type.String({ format: 'uuid', description: 'Also the webhook-id header, the same on every attempt.' }),
  type: Type.String(),
  url: Type.String(),
  status: Type.Union([Type.Literal('pending'), Type.Literal('delivered'), Type.Literal('failed')]),
  attempts: Type.Integer(),
  lastStatusCode: Type.Union([Type.Integer(), Type.Null()]),
  lastError: Type.Union([Type.String(), Type.Null()]),
  lastAttemptAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  nextAttemptAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  createdAt: Type.String({ format: 'date-time' }),
  deliveredAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
});

const DeliveryParams = Type.Object({ id: Uuid() });

const DeliveryPage = Type.Object({
  limit: Type.Optional(PageLimit(100, 50, 'Deliveries')),
  cursor: Type.Optional(PageCursor(200)),
  failing: Type.Optional(
    Type.Union([Type.Literal('true'), Type.Literal('false')], {
      description: 'true: only deliveries whose last attempt failed, given up or waiting for a retry.',
      errorMessage: 'must be true or false',
    }),
  ),
});

const Endpoint = Type.Object({
  endpointId: Type.String({ format: 'uuid' }),
  url: Type.String({ description: 'Normalised: scheme and host in lower case, no default port.' }),
  events: Type.Array(Type.Enum([...ENDPOINT_EVENTS])),
  createdAt: Type.String({ format: 'date-time' }),
  disabledAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
    description: 'When its receiver answered 410 Gone: no event is posted there since. Null while it takes events.',
  }),
});

const NewEndpoint = Type.Object({
  url: WebhookUrl(
    'Where every event of the subscribed types is posted, besides any per-request URL; a per-request URL ' +
      'equal to it (normalised) gets each event once.',
  ),
  events: Type.Array(Type.Enum([...ENDPOINT_EVENTS]), {
    minItems: 1,
    maxItems: ENDPOINT_EVENTS.length,
    uniqueItems: true,
    description: 'The event types posted there.',
  }),
  password: PasswordAgain,
});

const account = { auth: 'account', rateLimitGroup: 'account' } as const;

/** The account's webhook secret and its deliveries: route table first, handlers only call the service. */
export function webhookRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const tags = ['webhooks'];
  const askPassword = passwordAgain(ctx);

  r.get(
    '/webhooks/secret',
    {
      config: { ...account, scope: 'webhooks' },
      schema: {
        tags,
        summary: 'The secret that signs webhook posts',
        response: { 200: Secret, ...errorResponses(401, 409, 429) },
      },
    },
    async (request) => {
      const secrets = await ensureSecret(ctx.db, ctx.encryptionKey, ctx.clock, request.account.id);
      return secretView(secrets, ctx.clock.now());
    },
  );

  r.post(
    '/webhooks/secret/rotate',
    {
      config: { ...account, scope: 'webhooks' },
      schema: {
        tags,
        summary: 'A new signing secret; the old one keeps signing for 24 hours',
        response: { 200: Secret, ...errorResponses(401, 422, 429) },
      },
    },
    async (request, reply) =>
      idempotent(request, reply, ctx, request.account.id, postSecretRotation, () => ({
        accountId: request.account.id,
        next: newSecret(ctx.encryptionKey, request.account.id),
        by: auditBy(request, ctx.clock.now()),
      })),
  );

  r.get(
    '/webhooks/deliveries',
    {
      config: { ...account, scope: ['read', 'webhooks'] },
      schema: {
        tags,
        summary: 'Recent webhook deliveries, newest first; with failing=true, those whose last attempt failed',
        querystring: DeliveryPage,
        response: {
          200: Type.Object({ deliveries: Type.Array(Delivery), nextCursor: Type.Union([Type.String(), Type.Null()]) }),
          ...errorResponses(400, 401, 429),
        },
      },
    },
    async (request) => {
      const { limit, cursor, failing } = request.query;
      const page = await listDeliveries(ctx.db, request.account.id, {
        limit: Number(limit ?? 50),
        cursor,
        failing: failing === 'true',
      });
      return { deliveries: page.deliveries.map(deliveryView), nextCursor: page.nextCursor };
    },
  );

  r.get(
    '/webhooks/deliveries/:id',
    {
      config: { ...account, scope: ['read', 'webhooks'] },
      schema: {
        tags,
        summary: 'One webhook delivery, with the body it posts',
        params: DeliveryParams,
        response: {
          200: Type.Intersect([Delivery, Type.Object({ payload: Type.Unknown() })]),
          ...errorResponses(400, 401, 404, 429),
        },
      },
    },
    async (request) => {
      const row = await findDelivery(ctx.db, request.account.id, request.params.id);
      return { ...deliveryView(row), payload: JSON.parse(row.payload) as unknown };
    },
  );

  r.post(
    '/webhooks/deliveries/:id/retry',
    {
      config: { ...account, scope: 'webhooks' },
      schema: {
        tags,
        summary: 'Post a delivery again now, with the same webhook-id',
        params: DeliveryParams,
        response: { 202: Delivery, ...errorResponses(400, 401, 404, 409, 422, 429) },
      },
    },
    async (request, reply) =>
      idempotent(request, reply, ctx, request.account.id, postDeliveryRetry, () => ({
        accountId: request.account.id,
        id: request.params.id,
        now: ctx.clock.now(),
      })),
  );

  r.post(
    '/webhooks/endpoints',
    {
      config: { ...account, scope: 'webhooks' },
      schema: {
        tags,
        summary: `Post every event of some types of the account to a URL too (at most ${MAX_ENDPOINTS} URLs)`,
        body: NewEndpoint,
        response: { 201: Endpoint, ...errorResponses(400, 401, 403, 409, 415, 422, 429) },
      },
    },
    async (request, reply) => {
      await askPassword(request, request.body.password, 'add a webhook endpoint');
      return idempotent(request, reply, ctx, request.account.id, postEndpoint, () =>
        prepareEndpoint(request.account.id, request.body, ctx.clock.now(), auditBy(request, ctx.clock.now())),
      );
    },
  );

  r.get(
    '/webhooks/endpoints',
    {
      config: { ...account, scope: ['read', 'webhooks'] },
      schema: {
        tags,
        summary: "The account's webhook endpoints, oldest first",
        response: { 200: Type.Object({ endpoints: Type.Array(Endpoint) }), ...errorResponses(401, 429) },
      },
    },
    async (request) => ({ endpoints: (await listEndpoints(ctx.db, request.account.id)).map(endpointView) }),
  );

  r.delete(
    '/webhooks/endpoints/:endpointId',
    {
      config: { ...account, scope: 'webhooks' },
      schema: {
        tags,
        summary: 'Stop posting to an endpoint (events already gathered for it are still posted)',
        params: Type.Object({ endpointId: Uuid() }),
        response: errorResponses(400, 401, 404, 429),
      },
    },
    async (request, reply) => {
      const by = auditBy(request, ctx.clock.now());
      if (!(await deleteEndpoint(ctx.db, request.account.id, request.params.endpointId, by)))
        throw notFound('The webhook endpoint');
      return reply.code(204).send();
    },
  );
}
