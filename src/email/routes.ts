import { auditBy } from '../audit/entries.ts';
import { Type } from 'typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { erasureKey } from '../messaging/erased-identifiers.ts';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { AppContext } from '../context.ts';
import { emailAddressProblem } from '../crm/email-address.ts';
import { badRequest, conflict, notFound, unprocessable } from '../errors.ts';
import { errorResponses, PageCursor, PageLimit, Uuid } from '../http/schemas.ts';
import { idempotent } from '../http/idempotency.ts';
import { cancelSend } from '../messaging/accept.ts';
import { listSends, listSendsTo } from '../messaging/reads.ts';
import { DEFAULT_PREVIEW, DryRunQuery, SendListPage, SendListQuery } from '../messaging/schemas.ts';
import {
  suppressByRequest,
  listSuppressions,
  removeSuppression,
  type SuppressionView,
} from '../messaging/suppressions.ts';
import { emailJobKey, recordEmail } from './accept.ts';
import { emailDryRun } from './dry-run.ts';
import { listCampaigns, postCampaign, prepareCampaign } from './campaigns.ts';
import { readEmailBatch, readSandboxEmail } from './read.ts';
import { recordTracking, type TrackingEvent } from './record.ts';
import { recipientNamedBy } from './token-recipients.ts';
import { TRACKING_PATHS, trackingKey } from './tracking.ts';
import { readTrackingToken } from './tracking-tokens.ts';
import {
  BatchReadQuery,
  CampaignBody,
  CampaignPage,
  ComplaintRecorded,
  ComplaintRequest,
  CampaignRequest,
  EmailAccepted,
  EmailDryRunBody,
  EmailBatchRequest,
  PageQuery,
  SuppressionBody,
  SuppressionPage,
  SuppressionQuery,
  SuppressionRequest,
  type EmailBatchRequest as EmailBatchBody,
} from './schemas.ts';
import { BASE64 } from './validate.ts';
import { parseMailReport } from './report-reader.ts';
import { prepareEmailRequest } from './prepare.ts';
import { inboundMetrics, receiveReport } from './receive.ts';

/** `GET /email/batch`: `email` narrows it to the batches that include an address. */
const EmailListQuery = Type.Object({
  ...SendListQuery.properties,
  email: Type.Optional(
    Type.String({ minLength: 1, maxLength: 254, description: 'Only the batches that include this address.' }),
  ),
});

const email = { auth: 'account', rateLimitGroup: 'email' } as const;
const tags = ['email'];

/** An address in a request: lower-cased (addresses are compared so), or a 400 naming the field. */
function address(text: string, field: string): string {
  const problem = emailAddressProblem(text);
  if (problem) throw badRequest('The email address is not valid.', [{ field, message: problem }]);
  return text.toLowerCase();
}

/**
 * Email (SPEC §2.7, §3, §4 rule 5, §6; ARCHITECTURE.md for the reads, campaigns and suppressions):
 * route table first.
 */
export function emailRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();

  const accept = (body: EmailBatchBody, account: { id: string; timeZoneOffset: string }) =>
    prepareEmailRequest(ctx, body, account);

  r.post(
    '/email/batch',
    {
      config: { ...email, scope: 'email:send' },
      schema: {
        tags,
        summary: 'Send one email to recipients and/or the contacts of lists, now or at a time',
        body: EmailBatchRequest,
        querystring: DryRunQuery,
        response: { 200: EmailDryRunBody, 202: EmailAccepted, ...errorResponses(400, 401, 413, 415, 422, 429) },
      },
    },
    async (request, reply) =>
      request.query.dryRun === 'true'
        ? emailDryRun(ctx, request.body, request.account, Number(request.query.preview ?? DEFAULT_PREVIEW))
        : idempotent(request, reply, ctx, request.account.id, recordEmail, () => accept(request.body, request.account)),
  );

  const BatchParams = Type.Object({ batchId: Uuid() });

  r.get(
    '/email/batch',
    {
      config: { ...email, scope: 'read' },
      schema: {
        tags,
        summary:
          "The account's email batches, newest first: status and totals, a page at a time; with email, those " +
          'that include the address',
        querystring: EmailListQuery,
        response: { 200: SendListPage('batchId'), ...errorResponses(400, 401, 429) },
      },
    },
    async (request) => {
      const { email: given, cursor } = request.query;
      const limit = Number(request.query.limit ?? 20);
      let page: Awaited<ReturnType<typeof listSends>>;
      if (given === undefined) page = await listSends(ctx.db, request.account.id, 'email', { limit, cursor });
      else {
        const address = given.trim().toLowerCase();
        const problem = emailAddressProblem(address);
        if (problem) throw badRequest(`The email ${problem}.`, [{ field: 'email', message: problem }]);
        page = await listSendsTo(ctx.db, ctx.database.dialect, request.account.id, 'email', { address, limit, cursor });
      }
      return { batches: page.sends.map(({ id, ...send }) => ({ batchId: id, ...send })), nextCursor: page.nextCursor };
    },
  );

  r.get(
    '/email/batch/:batchId',
    {
      config: { ...email, scope: 'read' },
      schema: {
        tags,
        summary: 'An email batch: its status, totals and recipients with their events, a page at a time',
        params: BatchParams,
        querystring: BatchReadQuery,
        response: errorResponses(400, 401, 404, 429),
      },
    },
    async (request) => {
      const { limit, cursor, status } = request.query;
      const batchId = request.params.batchId;
      return readEmailBatch(ctx.db, request.account.id, batchId, { limit: Number(limit ?? 100), cursor, status });
    },
  );

  r.delete(
    '/email/batch/:batchId',
    {
      config: { ...email, scope: 'email:send' },
      schema: {
        tags,
        summary: 'Cancel an email batch that has not started sending (204); 409 once it has',
        params: BatchParams,
        response: errorResponses(400, 401, 404, 409, 429),
      },
    },
    async (request, reply) => {
      const sendId = request.params.batchId;
      const outcome = await ctx.database.call(cancelSend, {
        accountId: request.account.id,
        channel: 'email',
        sendId,
        jobKey: emailJobKey(sendId),
        now: ctx.clock.now(),
      });
      if (outcome === 'not found') throw notFound('The email batch');
      if (outcome === 'started')
        throw conflict('The email batch has started sending, or was cancelled already: it cannot be cancelled.');
      return reply.code(204).send();
    },
  );

  r.post(
    '/email/campaigns',
    {
      config: { ...email, scope: 'contacts:write' },
      schema: {
        tags,
        summary: 'Store an email campaign: HTML a batch sends by its emailCampaignId',
        body: CampaignRequest,
        response: { 201: CampaignBody, ...errorResponses(400, 401, 409, 413, 415, 429) },
      },
    },
    async (request, reply) =>
      idempotent(request, reply, ctx, request.account.id, postCampaign, () =>
        prepareCampaign(request.account.id, request.body, ctx.clock.now()),
      ),
  );

  r.get(
    '/email/campaigns',
    {
      config: { ...email, scope: 'read' },
      schema: {
        tags,
        summary: "The account's email campaigns, oldest first, a page at a time",
        querystring: PageQuery,
        response: { 200: CampaignPage, ...errorResponses(400, 401, 429) },
      },
    },
    async (request) =>
      listCampaigns(ctx.db, request.account.id, {
        limit: Number(request.query.limit ?? 100),
        cursor: request.query.cursor,
      }),
  );

  // Suppressions (ARCHITECTURE.md): addresses the account never sends to, whatever lists and consent say.
  const emailView = ({ address: suppressed, ...rest }: SuppressionView) => ({ email: suppressed, ...rest });

  r.post(
    '/email/suppressions',
    {
      config: { ...email, scope: 'suppressions' },
      schema: {
        tags,
        summary: 'Suppress an address: no email of this account goes to it (its recipients are Dropped)',
        body: SuppressionRequest,
        response: { 201: SuppressionBody, ...errorResponses(400, 401, 415, 429) },
      },
    },
    async (request, reply) => {
      const now = ctx.clock.now();
      const suppression = {
        accountId: request.account.id,
        channel: 'email' as const,
        address: address(request.body.email, 'email'),
        reason: request.body.reason ?? 'added by hand',
        now,
      };
      const key = await erasureKey(ctx.db, ctx.encryptionKey);
      const row = await suppressByRequest(ctx.db, suppression, auditBy(request, now), key);
      return reply.code(201).send(emailView(row));
    },
  );

  r.get(
    '/email/suppressions',
    {
      config: { ...email, scope: 'read' },
      schema: {
        tags,
        summary: "The account's suppressed addresses, in address order, a page at a time",
        querystring: SuppressionQuery,
        response: { 200: SuppressionPage, ...errorResponses(400, 401, 429) },
      },
    },
    async (request) => {
      const { query } = request;
      const page = await listSuppressions(ctx.db, request.account.id, 'email', {
        address: query.email === undefined ? undefined : address(query.email, 'email'),
        cursor: query.cursor,
        limit: Number(query.limit ?? 100),
        erasureKey: await erasureKey(ctx.db, ctx.encryptionKey),
      });
      return { suppressions: page.suppressions.map(emailView), nextCursor: page.nextCursor };
    },
  );

  r.delete(
    '/email/suppressions/:email',
    {
      config: { ...email, scope: 'suppressions' },
      schema: {
        tags,
        summary: 'Send to a suppressed address again (204; 404 if it was not suppressed)',
        params: Type.Object({ email: Type.String({ maxLength: 300 }) }),
        response: errorResponses(400, 401, 404, 429),
      },
    },
    async (request, reply) => {
      const key = await erasureKey(ctx.db, ctx.encryptionKey);
      await removeSuppression(
        ctx.db,
        request.account.id,
        'email',
        address(request.params.email, 'email'),
        key,
        auditBy(request, ctx.clock.now()),
      );
      return reply.code(204).send();
    },
  );

  r.get(
    '/sandbox/email',
    {
      config: { ...email, scope: 'read' },
      schema: {
        tags,
        summary:
          'What the sandbox transport took for this account, newest first, as raw MIME, a page at a time ' +
          '(EMAIL_TRANSPORT=sandbox:)',
        querystring: Type.Object({
          to: Type.Optional(Type.String({ maxLength: 300 })),
          limit: Type.Optional(PageLimit(1000, 100, 'Messages')),
          cursor: Type.Optional(PageCursor(40)),
        }),
        response: errorResponses(400, 401, 429),
      },
    },
    async (request) => {
      const { to, limit, cursor } = request.query;
      const page = { to: to === undefined ? undefined : address(to, 'to'), limit: Number(limit ?? 100), cursor };
      return readSandboxEmail(ctx.db, ctx.encryptionKey, request.account.id, page);
    },
  );

  // Spam complaints from feedback loops that post (ARCHITECTURE.md): the operator's, since
  // feedback loops report to whoever runs the sending servers. Mailed reports reach the inbound listener.
  const complaintDeps = {
    database: ctx.database,
    clock: ctx.clock,
    keys: trackingKey(ctx.encryptionKey),
    metrics: inboundMetrics(ctx.metrics),
  };
  r.post(
    '/email/complaints',
    {
      config: { auth: 'admin' },
      schema: {
        tags: ['admin'],
        summary:
          "Record a spam complaint from an ARF feedback report: Spam Report in the message's history and " +
          'webhook, the address suppressed and opted out, once however often it is posted',
        body: ComplaintRequest,
        response: { 200: ComplaintRecorded, ...errorResponses(400, 401, 413, 415, 422) },
      },
    },
    async (request) => {
      const arf = request.body.arf.replace(/\s+/g, '');
      if (arf === '' || !BASE64.test(arf))
        throw badRequest('The report is not valid.', [
          { field: 'arf', message: 'must be Base64 (A-Z, a-z, 0-9, + and /, padded with =) of the ARF message' },
        ]);
      const report = await parseMailReport(Buffer.from(arf, 'base64'));
      if (report.kind !== 'arf')
        throw unprocessable(
          'The message is not an ARF feedback report (multipart/report with a message/feedback-report part).',
          [
            {
              field: 'arf',
              message: report.kind === 'unparseable' ? report.problem : 'has no message/feedback-report part',
            },
          ],
        );
      const received = await receiveReport(complaintDeps, report, { deliveredTo: null, via: 'http' });
      if ('ignored' in received)
        throw unprocessable(
          `The report is of feedback type ${report.feedbackType}, not a complaint (abuse, fraud, virus or other).`,
          [{ field: 'arf', message: received.ignored }],
        );
      if ('refused' in received)
        throw unprocessable(
          "The report names no message Herald sent: neither its original's return path nor its Message-ID is " +
            "one of Herald's.",
          [{ field: 'arf', message: received.refused }],
        );
      return {
        event: 'Spam Report' as const,
        repeated: received.repeated,
        feedbackType: report.feedbackType,
        accountId: received.accountId,
        batchId: received.batchId,
        messageId: received.messageId,
        email: received.email,
      };
    },
  );

  // Tracking (issue 13): followed by anyone holding the email, so no token, no cookie, and the
  // same 404 for a token that is forged, altered or names nothing.
  const key = trackingKey(ctx.encryptionKey);
  const TokenParams = Type.Object({ token: Type.String({ maxLength: 100 }) });
  const follow = async (
    request: FastifyRequest<{ Params: { token: string } }>,
    kind: TrackingEvent['kind'],
    confirmed = false,
  ) => {
    const token = readTrackingToken(request.params.token);
    if (token === null || token.kind !== kind) return undefined;
    const recipient = await recipientNamedBy(ctx.database, key, token);
    if (recipient === null) return undefined;
    const event: TrackingEvent = kind === 'click' ? { kind, link: token.link ?? 0 } : { kind };
    const userAgent = request.headers['user-agent']?.slice(0, 512) ?? null;
    return ctx.database.call(recordTracking, {
      ...recipient,
      event,
      userAgent,
      head: request.method === 'HEAD',
      confirmed,
      now: ctx.clock.now(),
    });
  };

  r.get(
    `${TRACKING_PATHS.click}/:token`,
    {
      schema: {
        tags,
        summary: 'A tracked link: 302 to its URL, a Click recorded; 404 for a token that is not one',
        params: TokenParams,
        response: errorResponses(404),
      },
    },
    async (request, reply) => {
      const followed = await follow(request, 'click');
      if (typeof followed !== 'object' || !followed.url) throw notFound('The link');
      return reply.header('cache-control', 'no-store').redirect(followed.url, 302);
    },
  );

  r.get(
    `${TRACKING_PATHS.open}/:token`,
    {
      schema: {
        tags,
        summary:
          'The open pixel: a 1×1 GIF always (mail clients show broken images otherwise), an Open recorded ' +
          'for a token that is one',
        params: TokenParams,
      },
    },
    async (request, reply) => {
      await follow(request, 'open');
      return reply.header('cache-control', 'no-store').type('image/gif').send(PIXEL);
    },
  );

  // The link in the body (GET) and RFC 8058's one-click POST, which mail clients send with
  // `List-Unsubscribe=One-Click` as its form body: either unsubscribes, with no redirect; a
  // machine's GET (recordTracking) gets the page's button instead, which posts the same.
  r.get(
    `${TRACKING_PATHS.unsubscribe}/:token`,
    {
      schema: {
        tags,
        summary:
          'Unsubscribe from the email this link came in: an Unsubscribe recorded, emailOptIn false, the ' +
          'address suppressed; a link scanner gets a button to press instead',
        params: TokenParams,
        response: errorResponses(404),
      },
    },
    async (request, reply) => {
      const followed = await follow(request, 'unsubscribe');
      if (!followed) throw notFound('The unsubscribe link');
      reply.type('text/html; charset=utf-8').header('cache-control', 'no-store');
      if (followed === 'unconfirmed') {
        return reply.send(
          `<!doctype html><title>Unsubscribe</title><form method="post"><input type="hidden" ` +
            `name="List-Unsubscribe" value="One-Click"><p>Stop email from this sender to this address? ` +
            `<button>Unsubscribe</button></p></form>`,
        );
      }
      return reply.send(
        '<!doctype html><title>Unsubscribed</title><p>You are unsubscribed: no more email from this sender ' +
          'will reach this address.</p>',
      );
    },
  );
  // RFC 8058 §3.1: the POST's body is the form `List-Unsubscribe=One-Click`, as multipart/form-data
  // (SHOULD) or urlencoded (MAY), which only this route takes (elsewhere a form is a 415). The
  // token is what unsubscribes: the body is read (within the body limit) and left aside.
  // biome-ignore lint/nursery/noMisusedPromises: Fastify's register takes an async plugin (FastifyPluginAsync).
  app.register(async (scope) => {
    scope.addContentTypeParser(
      ['application/x-www-form-urlencoded', 'multipart/form-data'],
      { parseAs: 'string' },
      (_request, _body, done) => done(null, ''),
    );
    scope.withTypeProvider<TypeBoxTypeProvider>().post(
      `${TRACKING_PATHS.unsubscribe}/:token`,
      {
        schema: {
          tags,
          summary:
            'One-click unsubscribe (RFC 8058), as mail clients post it: the same as the link, answered 200 ' +
            'with no redirect',
          params: TokenParams,
          body: Type.Optional(Type.String({ maxLength: 1000, description: 'List-Unsubscribe=One-Click' })),
          response: errorResponses(404),
        },
      },
      async (request, reply) => {
        if (!(await follow(request, 'unsubscribe', true))) throw notFound('The unsubscribe link');
        return reply.type('text/plain; charset=utf-8').send('Unsubscribed.');
      },
    );
  });
}

/** A transparent 1×1 GIF. */
const PIXEL = Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64');
