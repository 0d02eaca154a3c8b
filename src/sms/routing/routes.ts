import { Type } from 'typebox';
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { AppContext } from '../../context.ts';
import { errorResponses } from '../../http/schemas.ts';
import { addConnection, listConnections, removeConnection } from './connections.ts';
import { readRoutes, replaceRoutes, viewOf } from './table.ts';
import { Connection, ConnectionState, RoutesBody, SmscName } from './schemas.ts';

const admin = { auth: 'admin' as const };

/**
 * The operator's SMS routes (ARCHITECTURE.md, "SMS routes (operator)"), behind ADMIN_TOKEN: the
 * SMSC connections beside SMS_TRANSPORT's `default`, and the table that routes numbers over them.
 */
export function smsRoutingRoutes(app: FastifyInstance, ctx: AppContext): void {
  if (!ctx.config.adminToken) return;
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const tags = ['admin'];
  const defaultTransport = { raw: ctx.config.smsTransportUrl ?? 'sandbox:', kind: ctx.config.smsTransport.kind };

  r.post(
    '/admin/smsc',
    {
      config: admin,
      schema: {
        tags,
        summary:
          'Add an SMSC connection: an smpp://, smpps:// or sandbox: URL as SMS_TRANSPORT takes it; its password ' +
          'is sealed at rest and shown as ***',
        body: Type.Object({ name: SmscName, url: Type.String({ minLength: 1, maxLength: 2000 }) }),
        response: { 201: Connection, ...errorResponses(400, 401, 409) },
      },
    },
    async (request, reply) =>
      reply.code(201).send(await addConnection(ctx.db, ctx.encryptionKey, ctx.clock, request.body)),
  );

  r.get(
    '/admin/smsc',
    {
      config: admin,
      schema: {
        tags,
        summary: 'The SMSC connections, `default` first, each with its state and the binds up on it',
        response: { 200: Type.Object({ smsc: Type.Array(ConnectionState) }), ...errorResponses(401) },
      },
    },
    async () => ({ smsc: await listConnections(ctx.db, ctx.clock, defaultTransport) }),
  );

  r.delete(
    '/admin/smsc/:name',
    {
      config: admin,
      schema: {
        tags,
        summary:
          'Remove an SMSC connection; 409 for `default`, while a route names it, or while parts it took await ' +
          'their receipts',
        params: Type.Object({ name: SmscName }),
        response: errorResponses(400, 401, 404, 409),
      },
    },
    async (request, reply) => {
      await removeConnection(ctx.db, request.params.name);
      return reply.code(204).send();
    },
  );

  r.put(
    '/admin/sms-routes',
    {
      config: admin,
      schema: {
        tags,
        summary:
          "Replace the SMS routing table: a number takes its account's own route with the longest matching " +
          'prefix, else the longest of those for every account, else `default`',
        body: RoutesBody,
        response: { 200: RoutesBody, ...errorResponses(400, 401, 422) },
      },
    },
    async (request) => ({ routes: await replaceRoutes(ctx.db, request.body.routes) }),
  );

  r.get(
    '/admin/sms-routes',
    {
      config: admin,
      schema: { tags, summary: 'The SMS routing table', response: { 200: RoutesBody, ...errorResponses(401) } },
    },
    async () => ({ routes: (await readRoutes(ctx.db)).map(viewOf) }),
  );
}
