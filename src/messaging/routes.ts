import { Type } from 'typebox';
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { offsetMinutes } from '../accounts/time-zone.ts';
import type { AppContext } from '../context.ts';
import { errorResponses, Uuid } from '../http/schemas.ts';
import { notFound } from '../errors.ts';
import { ContactIdParams, ListIdParams } from '../crm/schemas.ts';
import { contactMessages } from './contact-messages.ts';
import { deleteContact, deleteList } from './deletions.ts';
import { auditBy } from '../audit/entries.ts';
import { readMessage } from './reads.ts';
import {
  ContactMessagesPage,
  ContactMessagesQuery,
  MessageBody,
  StatsBody,
  StatsQuery,
  UsageBody,
  UsageQuery,
} from './schemas.ts';
import { readStats, readUsage, usageCsv } from './usage.ts';

const account = { auth: 'account', rateLimitGroup: 'account' } as const;
/** As the CRM's own routes (crm/routes.ts). */
const contacts = { auth: 'account', rateLimitGroup: 'contacts' } as const;
const tags = ['usage'];

/**
 * Reads over both channels: usage and statistics from the rollup (usage.ts), and what a contact
 * was sent; and the deletions of contacts and lists, which answer to sends and suppressions.
 */
export function messagingRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();

  r.get(
    '/usage',
    {
      config: { ...account, scope: 'read' },
      schema: {
        tags,
        summary:
          "Per day of the account's timeZoneOffset: SMS and emails billed (SMS parts by encoding) and the " +
          'statuses messages reached; as CSV with format=csv',
        querystring: UsageQuery,
        response: {
          200: { content: { 'application/json': { schema: UsageBody }, 'text/csv': { schema: Type.String() } } },
          ...errorResponses(400, 401, 429),
        },
      },
    },
    async (request, reply) => {
      const { from, to, format } = request.query;
      const usage = await readUsage(ctx.db, {
        accountId: request.account.id,
        offsetMinutes: offsetMinutes(request.account.timeZoneOffset) ?? 0,
        from,
        to,
      });
      if (format !== 'csv') return usage;
      return reply
        .type('text/csv; charset=utf-8')
        .header('content-disposition', `attachment; filename="herald-usage-${from}-to-${to}.csv"`)
        .send(usageCsv(usage));
    },
  );

  r.get(
    '/stats',
    {
      config: { ...account, scope: 'read' },
      schema: {
        tags,
        summary:
          'Per hour or day: messages of a channel sent, delivered, failed or bounced, opened, clicked, ' +
          'unsubscribed, complained of',
        querystring: StatsQuery,
        response: { 200: StatsBody, ...errorResponses(400, 401, 429) },
      },
    },
    async (request) =>
      readStats(ctx.db, {
        accountId: request.account.id,
        offsetMinutes: offsetMinutes(request.account.timeZoneOffset) ?? 0,
        channel: request.query.channel,
        from: request.query.from,
        to: request.query.to,
        interval: request.query.interval ?? 'day',
      }),
  );

  r.get(
    '/contacts/:contactId/messages',
    {
      config: { ...account, scope: 'read' },
      schema: {
        tags: ['contacts'],
        summary:
          "What the account sent a contact's number and address, by SMS and email, newest first, a page at a time",
        params: ContactIdParams,
        querystring: ContactMessagesQuery,
        response: { 200: ContactMessagesPage, ...errorResponses(400, 401, 404, 429) },
      },
    },
    async (request) =>
      contactMessages(ctx.db, ctx.database.dialect, {
        accountId: request.account.id,
        contactId: Number(request.params.contactId),
        limit: Number(request.query.limit ?? 20),
        cursor: request.query.cursor,
      }),
  );

  r.delete(
    '/contacts/:contactId',
    {
      config: { ...contacts, scope: 'contacts:write' },
      schema: {
        tags: ['crm'],
        summary:
          'Delete a contact (204): its list memberships go, its messages stay, and a number or address it held ' +
          'without consent stays suppressed',
        params: ContactIdParams,
        response: errorResponses(400, 401, 404, 429),
      },
    },
    async (request, reply) => {
      const deleted = await ctx.database.call(deleteContact, {
        accountId: request.account.id,
        contactId: Number(request.params.contactId),
        by: auditBy(request, ctx.clock.now()),
      });
      if (!deleted) throw notFound('The contact');
      return reply.code(204).send();
    },
  );

  r.delete(
    '/lists/:listId',
    {
      config: { ...contacts, scope: 'contacts:write' },
      schema: {
        tags: ['crm'],
        summary:
          'Delete a list (204), its contacts staying; 409 for `All contacts`, or while a send not yet expanded ' +
          'or a contact batch not yet applied names it',
        params: ListIdParams,
        response: errorResponses(400, 401, 404, 409, 429),
      },
    },
    async (request, reply) => {
      await ctx.database.call(deleteList, {
        accountId: request.account.id,
        listId: request.params.listId,
        by: auditBy(request, ctx.clock.now()),
      });
      return reply.code(204).send();
    },
  );

  r.get(
    '/messages/:messageId',
    {
      config: { ...account, scope: 'read' },
      schema: {
        tags,
        summary: 'One message by its messageId, SMS or email: its send, recipient, status and history',
        params: Type.Object({ messageId: Uuid() }),
        response: { 200: MessageBody, ...errorResponses(400, 401, 404, 429) },
      },
    },
    async (request) => {
      const { channel, send, row, history } = await readMessage(ctx.db, request.account.id, request.params.messageId);
      const common = { messageId: row.message_id!, status: row.status, reason: row.reason };
      const at = (ms: number) => new Date(Number(ms)).toISOString();
      if (channel === 'sms') {
        return {
          channel,
          queueId: send.id,
          recipient: row.address,
          ...common,
          history: history.map((h) => ({ status: h.status, at: at(h.at) })),
        };
      }
      // As GET /email/batch/{batchId} shows each recipient's events (email/read.ts).
      return {
        channel,
        batchId: send.id,
        email: row.address,
        ...common,
        history: history.map((h) => ({
          event: h.status,
          at: at(h.at),
          ...(h.url === null ? {} : { url: h.url }),
          ...(h.reply === null ? {} : { reply: h.reply }),
          ...(h.machine === null ? {} : { machine: Boolean(h.machine) }),
        })),
      };
    },
  );
}
