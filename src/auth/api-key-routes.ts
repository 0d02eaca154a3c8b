import { Type } from 'typebox';
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { AppContext } from '../context.ts';
import { notFound, unprocessable } from '../errors.ts';
import { idempotent } from '../http/idempotency.ts';
import { errorResponses, Uuid } from '../http/schemas.ts';
import type { AccessCache } from './access-cache.ts';
import { SCOPES, listApiKeys, postApiKey, prepareApiKey, revokeApiKey } from './api-keys.ts';
import { PasswordAgain, passwordAgain } from './password-again.ts';
import { auditBy } from '../audit/entries.ts';

const ApiKeyFields = {
  apiKeyId: Type.String({ format: 'uuid' }),
  name: Type.String(),
  scopes: Type.Array(Type.Enum([...SCOPES])),
  createdAt: Type.String({ format: 'date-time' }),
  expiresAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
};

const CreatedApiKey = Type.Object({
  ...ApiKeyFields,
  key: Type.Optional(
    Type.String({
      description:
        'The key (hk_…), shown this once: Herald keeps only its hash. A replay of the request (Idempotency-Key) ' +
        'answers without it.',
    }),
  ),
});

const ApiKey = Type.Object({
  ...ApiKeyFields,
  lastUsedAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
    description: 'Its last request, to the minute.',
  }),
});

/**
 * Keys never manage keys: no scope lets one in (`scope: []`), so a leaked key cannot mint
 * itself a successor or revoke the others.
 */
const keys = { auth: 'account', rateLimitGroup: 'account', scope: [] } as const;
const tags = ['api keys'];

/** API keys (ARCHITECTURE.md, "Access and integration"): route table first, handlers only call api-keys.ts. */
export function apiKeyRoutes(app: FastifyInstance, ctx: AppContext, accessCache: AccessCache): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const askPassword = passwordAgain(ctx);

  r.post(
    '/api-keys',
    {
      config: keys,
      schema: {
        tags,
        summary: 'Create an API key with scopes; the key is shown once',
        body: Type.Object(
          {
            name: Type.String({ minLength: 1, maxLength: 100 }),
            scopes: Type.Array(Type.Enum([...SCOPES]), { minItems: 1, maxItems: 20 }),
            expiresAt: Type.Optional(Type.String({ format: 'date-time', description: 'Unset: it never expires.' })),
            password: PasswordAgain,
          },
          { additionalProperties: false },
        ),
        response: { 201: CreatedApiKey, ...errorResponses(400, 401, 403, 415, 422, 429) },
      },
    },
    async (request, reply) => {
      const { account, body } = request;
      await askPassword(request, body.password, 'create an API key');
      const now = ctx.clock.now();
      const { password: _, ...fields } = body;
      // Checked only when the key is made: a retry with its Idempotency-Key gets the key made,
      // whenever it comes.
      return idempotent(request, reply, ctx, account.id, postApiKey, () => {
        if (body.expiresAt !== undefined && Date.parse(body.expiresAt) <= now) {
          throw unprocessable('expiresAt must be in the future.', [
            { field: 'expiresAt', message: 'is not in the future' },
          ]);
        }
        return prepareApiKey(account.id, fields, auditBy(request, now));
      });
    },
  );

  r.get(
    '/api-keys',
    {
      config: keys,
      schema: {
        tags,
        summary: "The account's API keys, with their last use (never the keys)",
        response: { 200: Type.Object({ apiKeys: Type.Array(ApiKey) }), ...errorResponses(401, 403, 429) },
      },
    },
    async (request) => ({ apiKeys: await listApiKeys(ctx.db, request.account.id) }),
  );

  r.delete(
    '/api-keys/:apiKeyId',
    {
      config: keys,
      schema: {
        tags,
        summary: 'Revoke an API key: refused from the next request',
        params: Type.Object({ apiKeyId: Uuid() }),
        response: errorResponses(400, 401, 403, 404, 429),
      },
    },
    async (request, reply) => {
      const hash = await revokeApiKey(
        ctx.db,
        request.account.id,
        request.params.apiKeyId,
        auditBy(request, ctx.clock.now()),
      );
      if (hash === undefined) throw notFound('The API key');
      accessCache.forgetApiKey(hash);
      return reply.code(204).send();
    },
  );
}
