import { Type } from 'typebox';
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { AppContext } from '../context.ts';
import { errorResponses, PageCursor, PageLimit } from '../http/schemas.ts';
import { AUDIT_ACTIONS, listAudit } from './entries.ts';

const Entry = Type.Object({
  at: Type.String({ format: 'date-time' }),
  actor: Type.String({ description: 'token, apiKey:<apiKeyId>, console, admin or receiver.' }),
  action: Type.String({ description: `One of ${AUDIT_ACTIONS.join(', ')}.` }),
  target: Type.Union([Type.String(), Type.Null()], {
    description:
      "What was changed: an id, or a person's number or address as its keyed hash (erased:…); null: the account.",
  }),
  ip: Type.Union([Type.String(), Type.Null()], { description: 'The address the change came from.' }),
});

/** GET /audit (ARCHITECTURE.md, "Access and integration"; docs/audit.md). */
export function auditRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  r.get(
    '/audit',
    {
      config: { auth: 'account', rateLimitGroup: 'account', scope: 'account' },
      schema: {
        tags: ['account'],
        summary: "The account's audit log, newest first: who changed what, from where",
        querystring: Type.Object({
          limit: Type.Optional(PageLimit(100, 100, 'Entries')),
          cursor: Type.Optional(PageCursor(100)),
        }),
        response: {
          200: Type.Object({ entries: Type.Array(Entry), nextCursor: Type.Union([Type.String(), Type.Null()]) }),
          ...errorResponses(400, 401, 403, 429),
        },
      },
    },
    async (request) =>
      listAudit(ctx.db, request.account.id, {
        cursor: request.query.cursor,
        limit: Number(request.query.limit ?? 100),
      }),
  );
}
