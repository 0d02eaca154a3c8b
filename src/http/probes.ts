import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../context.ts';
import { isReachable } from '../db/database.ts';

export function probeRoutes(app: FastifyInstance, ctx: AppContext): void {
  app.get('/healthz', { schema: { tags: ['operations'], summary: 'The process is up' } }, async () => ({
    status: 'ok',
  }));
  app.get(
    '/readyz',
    { schema: { tags: ['operations'], summary: 'The database is reachable' } },
    async (_request, reply) => {
      if (await isReachable(ctx.database)) return { status: 'ready' };
      return reply.code(503).send({ status: 'Failure', message: 'The database is not reachable.', errors: [] });
    },
  );
}
