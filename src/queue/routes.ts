import { Type } from 'typebox';
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { isoOrNull } from '../clock.ts';
import type { AppContext } from '../context.ts';
import { notFound } from '../errors.ts';
import { errorResponses, PageCursor, PageLimit } from '../http/schemas.ts';
import { listJobs, reviveJob, type JobRow } from './queries.ts';

const JobBody = Type.Object({
  id: Type.Integer(),
  kind: Type.String(),
  accountId: Type.Union([Type.String(), Type.Null()]),
  state: Type.Union([Type.Literal('ready'), Type.Literal('running'), Type.Literal('dead')]),
  attempts: Type.Integer(),
  maxAttempts: Type.Integer(),
  lapses: Type.Integer({
    description: 'Leases that lapsed since its run last recorded progress: its worker died or hung. Five make it dead.',
  }),
  priority: Type.Integer({ description: 'Its lane: lower is claimed first.' }),
  runAt: Type.String({ format: 'date-time' }),
  lastError: Type.Union([Type.String(), Type.Null()]),
  createdAt: Type.String({ format: 'date-time' }),
  finishedAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
});

function jobView(row: JobRow) {
  return {
    id: row.id,
    kind: row.kind,
    accountId: row.account_id,
    state: row.state,
    attempts: row.attempts,
    maxAttempts: row.max_attempts,
    lapses: row.lapses,
    priority: row.priority,
    runAt: new Date(row.run_at).toISOString(),
    lastError: row.last_error,
    createdAt: new Date(row.created_at).toISOString(),
    finishedAt: isoOrNull(row.finished_at),
  };
}

const admin = { auth: 'admin' as const };

/** The operator's view of the queue (ADMIN_TOKEN): dead jobs kept for inspection, and their revival. */
export function queueRoutes(app: FastifyInstance, ctx: AppContext): void {
  if (!ctx.config.adminToken) return;
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const tags = ['admin'];

  r.get(
    '/admin/jobs',
    {
      config: admin,
      schema: {
        tags,
        summary: 'Jobs in one state (dead by default), newest first, a page at a time',
        querystring: Type.Object({
          state: Type.Optional(Type.Union([Type.Literal('ready'), Type.Literal('running'), Type.Literal('dead')])),
          kind: Type.Optional(Type.String({ maxLength: 100 })),
          limit: Type.Optional(PageLimit(1000, 100, 'Jobs')),
          cursor: Type.Optional(PageCursor(40)),
        }),
        response: {
          200: Type.Object({ jobs: Type.Array(JobBody), nextCursor: Type.Union([Type.String(), Type.Null()]) }),
          ...errorResponses(400, 401),
        },
      },
    },
    async (request) => {
      const { state = 'dead', kind, limit = '100', cursor } = request.query;
      const page = await listJobs(ctx.db, { state, kind, limit: Number(limit), cursor });
      return { jobs: page.jobs.map(jobView), nextCursor: page.nextCursor };
    },
  );

  r.post(
    '/admin/jobs/:id/retry',
    {
      config: admin,
      schema: {
        tags,
        summary: 'Run a dead job again now, with fresh counts of attempts and lapses',
        params: Type.Object({
          id: Type.String({ pattern: '^[0-9]{1,15}$', errorMessage: 'must be a job id: digits only, at most 15' }),
        }),
        response: { 200: JobBody, ...errorResponses(400, 401, 404) },
      },
    },
    async (request) => {
      const row = await reviveJob(ctx.db, { id: Number(request.params.id) }, ctx.clock.now());
      if (!row) throw notFound('A dead job with this id');
      return jobView(row);
    },
  );
}
