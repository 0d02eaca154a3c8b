import { auditBy } from '../audit/entries.ts';
import { Type } from 'typebox';
import type { FastifyInstance } from 'fastify';
import { erasureKey } from '../messaging/erased-identifiers.ts';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { AuthenticatedAccount } from '../auth/bearer.ts';
import type { AppContext } from '../context.ts';
import { conflict, notFound, unprocessable } from '../errors.ts';
import { errorResponses, MultilineText, PageCursor, Uuid } from '../http/schemas.ts';
import { idempotent } from '../http/idempotency.ts';
import {
  suppressByRequest,
  listSuppressions,
  removeSuppression,
  type SuppressionView,
} from '../messaging/suppressions.ts';
import { mobileFromDigits } from '../crm/mobile-number.ts';
import { cancelSend } from '../messaging/accept.ts';
import { listSends, listSendsTo } from '../messaging/reads.ts';
import { DEFAULT_PREVIEW, DryRunQuery, RecipientStatus, SendListPage, SendListQuery } from '../messaging/schemas.ts';
import { recordSms, recordSmsSingle, sendJobKey } from './accept.ts';
import type { SmsDraft } from './draft.ts';
import { receiveInboundSms } from './inbound.ts';
import { sendsOnlyToSandbox } from './routing/connections.ts';
import { readSandboxSms, readSms } from './read.ts';
import { smsDryRun } from './dry-run.ts';
import { SmsAccepted, SmsBatchRequest, SmsDryRunBody, SmsSingleRequest, type SmsRequest } from './schemas.ts';
import { prepareSmsRequest } from './prepare.ts';

const sms = { auth: 'account', rateLimitGroup: 'sms' } as const;
const tags = ['sms'];

/** `GET /sms`: `recipient` narrows it to the requests that include a number. */
const SmsListQuery = Type.Object({
  ...SendListQuery.properties,
  recipient: Type.Optional(
    Type.String({
      pattern: '^[0-9]{4,18}$',
      description: 'Only the requests that include this number (country code and number, digits only).',
      errorMessage: 'is the country code and number, digits only (4 to 18 of them)',
    }),
  ),
});

const Limit = Type.String({ pattern: '^([1-9][0-9]{0,2}|1000)$', errorMessage: 'must be 1 to 1000' });
/** `GET /sms/{queueId}`: a page of its recipients, those at one status word with `status`. */
const ReadQuery = Type.Object({
  limit: Type.Optional(Limit),
  cursor: Type.Optional(Type.String()),
  status: Type.Optional(RecipientStatus('sms')),
});

/** SMS (SPEC §2.1–2.5, §4 rules 1–3; ARCHITECTURE.md for the reads): route table first. */
export function smsRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();

  const accept = (kind: SmsDraft['kind'], body: SmsRequest, account: AuthenticatedAccount) =>
    prepareSmsRequest(ctx, kind, body, account);
  // A dry run writes nothing, an Idempotency-Key's record included: it is not the send.
  const dryRun = (kind: SmsDraft['kind'], body: SmsRequest, account: AuthenticatedAccount, preview?: string) =>
    smsDryRun(ctx, kind, body, account, Number(preview ?? DEFAULT_PREVIEW));

  r.post(
    '/sms/single',
    {
      config: { ...sms, scope: 'sms:send' },
      schema: {
        tags,
        summary: 'Send one SMS to one recipient (a one-time passcode, an alert), now or at a time',
        body: SmsSingleRequest,
        querystring: DryRunQuery,
        response: { 200: SmsDryRunBody, 202: SmsAccepted, ...errorResponses(400, 401, 413, 415, 422, 429) },
      },
    },
    async (request, reply) =>
      request.query.dryRun === 'true'
        ? dryRun('single', request.body, request.account, request.query.preview)
        : idempotent(request, reply, ctx, request.account.id, recordSmsSingle, () =>
            accept('single', request.body, request.account),
          ),
  );

  r.post(
    '/sms/batch',
    {
      config: { ...sms, scope: 'sms:send' },
      schema: {
        tags,
        summary: 'Send one SMS text to recipients and/or the contacts of lists, now or at a time',
        body: SmsBatchRequest,
        querystring: DryRunQuery,
        response: { 200: SmsDryRunBody, 202: SmsAccepted, ...errorResponses(400, 401, 413, 415, 422, 429) },
      },
    },
    async (request, reply) =>
      request.query.dryRun === 'true'
        ? dryRun('batch', request.body, request.account, request.query.preview)
        : idempotent(request, reply, ctx, request.account.id, recordSms, () =>
            accept('batch', request.body, request.account),
          ),
  );

  r.get(
    '/sms',
    {
      config: { ...sms, scope: 'read' },
      schema: {
        tags,
        summary:
          "The account's SMS requests, newest first: status and totals, a page at a time; with recipient, " +
          'those that include the number',
        querystring: SmsListQuery,
        response: { 200: SendListPage('queueId'), ...errorResponses(400, 401, 429) },
      },
    },
    async (request) => {
      const { recipient, cursor } = request.query;
      const limit = Number(request.query.limit ?? 20);
      let page: Awaited<ReturnType<typeof listSends>>;
      if (recipient === undefined) page = await listSends(ctx.db, request.account.id, 'sms', { limit, cursor });
      else {
        // Stored as the sends store it: E.164 digits (44 07911… is 447911…).
        const number = mobileFromDigits(recipient);
        const address = 'mobile' in number ? number.mobile : recipient;
        page = await listSendsTo(ctx.db, ctx.database.dialect, request.account.id, 'sms', { address, limit, cursor });
      }
      return { sends: page.sends.map(({ id, ...send }) => ({ queueId: id, ...send })), nextCursor: page.nextCursor };
    },
  );

  r.get(
    '/sms/:queueId',
    {
      config: { ...sms, scope: 'read' },
      schema: {
        tags,
        summary: 'An SMS request: its status, totals and recipients, a page at a time',
        params: Type.Object({ queueId: Uuid() }),
        querystring: ReadQuery,
        response: errorResponses(400, 401, 404, 429),
      },
    },
    async (request) => {
      const { limit, cursor, status } = request.query;
      const queueId = request.params.queueId;
      return readSms(ctx.db, request.account.id, queueId, { limit: Number(limit ?? 100), cursor, status });
    },
  );

  r.delete(
    '/sms/:queueId',
    {
      config: { ...sms, scope: 'sms:send' },
      schema: {
        tags,
        summary: 'Cancel an SMS request that has not started, or the recipients quiet hours hold (204); 409 else',
        params: Type.Object({ queueId: Uuid() }),
        response: errorResponses(400, 401, 404, 409, 429),
      },
    },
    async (request, reply) => {
      const sendId = request.params.queueId;
      const outcome = await ctx.database.call(cancelSend, {
        accountId: request.account.id,
        channel: 'sms',
        sendId,
        jobKey: sendJobKey(sendId),
        now: ctx.clock.now(),
      });
      if (outcome === 'not found') throw notFound('The SMS');
      if (outcome === 'started')
        throw conflict('The SMS has started sending, or was cancelled already: it cannot be cancelled.');
      return reply.code(204).send();
    },
  );

  // Suppressions (ARCHITECTURE.md): numbers the account never sends to, shaped like email's.
  const Digits = Type.String({
    pattern: '^[0-9]{6,18}$',
    errorMessage: 'must be the country code and number, digits only',
  });
  const SuppressionBody = Type.Object({ number: Type.String(), reason: Type.String(), createdAt: Type.String() });
  const number = (digits: string) => {
    const parsed = mobileFromDigits(digits);
    return 'mobile' in parsed ? parsed.mobile : digits;
  };
  const smsView = ({ address, ...rest }: SuppressionView) => ({ number: address, ...rest });

  r.post(
    '/sms/suppressions',
    {
      config: { ...sms, scope: 'suppressions' },
      schema: {
        tags,
        summary: 'Suppress a number: no SMS of this account goes to it',
        body: Type.Object({ number: Digits, reason: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })) }),
        response: { 201: SuppressionBody, ...errorResponses(400, 401, 415, 429) },
      },
    },
    async (request, reply) => {
      const now = ctx.clock.now();
      const suppression = {
        accountId: request.account.id,
        channel: 'sms' as const,
        address: number(request.body.number),
        reason: request.body.reason ?? 'added by hand',
        now,
      };
      const key = await erasureKey(ctx.db, ctx.encryptionKey);
      const row = await suppressByRequest(ctx.db, suppression, auditBy(request, now), key);
      return reply.code(201).send(smsView(row));
    },
  );

  r.get(
    '/sms/suppressions',
    {
      config: { ...sms, scope: 'read' },
      schema: {
        tags,
        summary: "The account's suppressed numbers, a page at a time",
        querystring: Type.Object({
          number: Type.Optional(Digits),
          cursor: Type.Optional(Type.String()),
          limit: Type.Optional(Limit),
        }),
        response: {
          200: Type.Object({
            suppressions: Type.Array(SuppressionBody),
            nextCursor: Type.Union([Type.String(), Type.Null()]),
          }),
          ...errorResponses(400, 401, 429),
        },
      },
    },
    async (request) => {
      const page = await listSuppressions(ctx.db, request.account.id, 'sms', {
        address: request.query.number === undefined ? undefined : number(request.query.number),
        cursor: request.query.cursor,
        limit: Number(request.query.limit ?? 100),
        erasureKey: await erasureKey(ctx.db, ctx.encryptionKey),
      });
      return { suppressions: page.suppressions.map(smsView), nextCursor: page.nextCursor };
    },
  );

  r.delete(
    '/sms/suppressions/:number',
    {
      config: { ...sms, scope: 'suppressions' },
      schema: {
        tags,
        summary: 'Send to a suppressed number again',
        params: Type.Object({ number: Digits }),
        response: errorResponses(400, 401, 404, 429),
      },
    },
    async (request, reply) => {
      const key = await erasureKey(ctx.db, ctx.encryptionKey);
      await removeSuppression(
        ctx.db,
        request.account.id,
        'sms',
        number(request.params.number),
        key,
        auditBy(request, ctx.clock.now()),
      );
      return reply.code(204).send();
    },
  );

  r.get(
    '/sandbox/sms',
    {
      config: { ...sms, scope: 'read' },
      schema: {
        tags,
        summary:
          'What the sandbox transport took for this account, newest first, a page at a time ' +
          '(SMS_TRANSPORT=sandbox:)',
        querystring: Type.Object({
          recipient: Type.Optional(
            Type.String({ pattern: '^[0-9]{1,17}$', errorMessage: 'must be the country code and number, digits only' }),
          ),
          limit: Type.Optional(Limit),
          cursor: Type.Optional(PageCursor(40)),
        }),
        response: errorResponses(400, 401, 429),
      },
    },
    async (request) => {
      const { recipient, limit, cursor } = request.query;
      return readSandboxSms(ctx.db, ctx.encryptionKey, request.account.id, {
        recipient,
        limit: Number(limit ?? 100),
        cursor,
      });
    },
  );

  // A message from a handset, as an SMSC would bring one (sms/inbound.ts), for development.
  // Registered whatever the transport, so that under SMPP it says why it cannot be used.
  const Address = Type.String({
    pattern: '^\\+?[0-9]{3,17}$',
    errorMessage: 'must be the country code and number, digits only',
  });
  r.post(
    '/sandbox/sms/inbound',
    {
      config: { ...sms, scope: 'sms:send' },
      schema: {
        tags,
        summary:
          "Simulate a message from a handset (MO) to one of this account's numbers, or replying to its " +
          'messages: stored, STOP/START applied, posted to inboundSmsWebhookUrl (SMS_TRANSPORT=sandbox:)',
        body: Type.Object({
          from: Address,
          to: Type.String({
            minLength: 1,
            maxLength: 17,
            description: "One of the account's numeric sender names, or a sender name it last sent to `from` from",
          }),
          text: MultilineText({ maxLength: 1600 }),
        }),
        response: {
          201: Type.Object({
            from: Type.String(),
            to: Type.String(),
            text: Type.String(),
            contactId: Type.Union([Type.Integer(), Type.Null()]),
            keyword: Type.Union([Type.Literal('stop'), Type.Literal('start'), Type.Null()]),
          }),
          ...errorResponses(400, 401, 409, 415, 422, 429),
        },
      },
    },
    async (request, reply) => {
      if (!(await sendsOnlyToSandbox(ctx.db, ctx.config.smsTransport.kind))) {
        throw conflict(
          'Simulating a message from a handset needs the sandbox transport (SMS_TRANSPORT=sandbox:, and no ' +
            'connection over SMPP); this service sends over SMPP, where messages from handsets come from the SMSC.',
        );
      }
      const { from, to, text } = request.body;
      const outcome = await receiveInboundSms(
        ctx.database,
        ctx.clock,
        { from, to, text, at: ctx.clock.now() },
        { defaultSenderName: ctx.config.defaultSenderName, onlyAccountId: request.account.id },
      );
      if (!outcome) {
        throw unprocessable('The message would reach no account of yours.', [
          {
            field: 'to',
            message:
              'is neither a numeric sender name of this account nor a sender name it last sent to this number from',
          },
        ]);
      }
      return reply.code(201).send({ from, to, text, contactId: outcome.contactId, keyword: outcome.keyword });
    },
  );
}
