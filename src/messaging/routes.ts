import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { offsetMinutes } from '../time-zone.ts';
import type { AppContext } from '../context.ts';
import { errorResponses } from '../http/schemas.ts';
import { StatsBody, StatsQuery, UsageBody, UsageQuery } from './schemas.ts';
import { readStats, readUsage } from './usage.ts';

const account = { auth: 'account', rateLimitGroup: 'account' } as const;
const tags = ['usage'];

/** Usage and statistics over both channels, from the rollup (src/messaging/usage.ts): route table first. */
export function usageRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();

  r.get('/usage', {
    config: account,
    schema: { tags, summary: "Per day of the account's timeZoneOffset: SMS and emails billed (SMS parts by encoding) and the statuses messages reached", querystring: UsageQuery, response: { 200: UsageBody, ...errorResponses(400, 401, 429) } },
  }, async (request) => readUsage(ctx.db, { accountId: request.account.id, offsetMinutes: offsetMinutes(request.account.timeZoneOffset) ?? 0, ...request.query }));

  r.get('/stats', {
    config: account,
    schema: { tags, summary: 'Per hour or day: messages of a channel sent, delivered, failed or bounced, opened, clicked, unsubscribed, complained of', querystring: StatsQuery, response: { 200: StatsBody, ...errorResponses(400, 401, 429) } },
  }, async (request) =>
    readStats(ctx.db, { accountId: request.account.id, offsetMinutes: offsetMinutes(request.account.timeZoneOffset) ?? 0, channel: request.query.channel, from: request.query.from, to: request.query.to, interval: request.query.interval ?? 'day' }));
}
