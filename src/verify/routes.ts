import { type Static, Type } from 'typebox';
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { offsetMinutes } from '../accounts/time-zone.ts';
import { verifySettings } from '../accounts/verify-settings.ts';
import type { AuthenticatedAccount } from '../auth/bearer.ts';
import type { AppContext } from '../context.ts';
import { emailAddressProblem } from '../crm/email-address.ts';
import { Gathering, GROUP_SIZE } from '../db/gathering.ts';
import { SYNCHRONOUS_READS } from '../db/dialect.ts';
import { isAnyOf } from '../db/in-json.ts';
import { countryOfMobile, mobileFromDigits, type MobileNumber } from '../crm/mobile-number.ts';
import { prepareEmailRequest } from '../email/prepare.ts';
import { escapeHtml } from '../email/render.ts';
import { AppError, badRequest, notFound, unprocessable } from '../errors.ts';
import { idempotent } from '../http/idempotency.ts';
import { errorResponses, MultilineText, Uuid } from '../http/schemas.ts';
import { newSendId } from '../messaging/accept.ts';
import { prepareSmsRequest } from '../sms/prepare.ts';
import { WebhookUrl } from '../webhooks/destination.ts';
import { codeHash, codeKey, codeMatches, newCode } from './codes.ts';
import { Verification } from './schemas.ts';
import {
  cancelVerification,
  checkVerification,
  checkVerificationGroup,
  type CheckVerification,
  isPrefixRefusal,
  ownVerification,
  recordBlocked,
  startVerification,
  verificationView,
  type StartVerification,
} from './record.ts';
import { registerVerifyMetrics } from './metrics.ts';
import { readVerifyStats } from './stats.ts';

const verify = { auth: 'account', rateLimitGroup: 'verify' } as const;
const tags = ['verify'];

const DEFAULT_TEMPLATE = 'Your verification code is [code]';
const DEFAULT_SUBJECT = 'Your verification code';
const CODE_TAG = '[code]';

const StartRequest = Type.Object({
  to: Type.String({
    maxLength: 320,
    description: 'By SMS the number, country code then digits (as /sms/single); by email the address.',
  }),
  channel: Type.Optional(
    Type.Union([Type.Literal('sms'), Type.Literal('email')], { description: '`sms` (the default) or `email`.' }),
  ),
  senderName: Type.Optional(
    Type.String({
      maxLength: 200,
      description: "By SMS one of the account's sender names (at most 15 characters); by email the From name.",
    }),
  ),
  senderFrom: Type.Optional(
    Type.String({
      maxLength: 264,
      description: 'By email, the From address: at DEFAULT_EMAIL_DOMAIN (no-reply@ it by default) or a sender domain.',
    }),
  ),
  subject: Type.Optional(
    Type.String({ maxLength: 998, description: `By email, the subject; "${DEFAULT_SUBJECT}" by default.` }),
  ),
  template: Type.Optional(
    MultilineText({
      maxLength: 1000,
      description: `The message; must hold ${CODE_TAG}, where the code goes. "${DEFAULT_TEMPLATE}" by default.`,
    }),
  ),
  codeLength: Type.Optional(
    Type.Integer({ minimum: 4, maximum: 10, description: 'Digits of the code; 6 by default.' }),
  ),
  ttlSeconds: Type.Optional(
    Type.Integer({ minimum: 60, maximum: 3600, description: 'How long the code checks; 600 by default.' }),
  ),
  webHookUrl: Type.Optional(WebhookUrl('Receives `verify.status` at approved, failed, expired and cancelled, signed.')),
});

const Started = Type.Omit(Verification, ['attemptsLeft', 'createdAt']);
const Checked = Type.Object({ verificationId: Type.String(), status: Type.String(), attemptsLeft: Type.Integer() });
const Params = Type.Object({ verificationId: Uuid() });
const Day = Type.String({ pattern: '^[0-9]{4}-[0-9]{2}-[0-9]{2}$', errorMessage: 'must be a date YYYY-MM-DD' });

/** Fields of the code's SMS or email request as the client named them in its POST /verify. */
const FIELD_OF: Record<string, string> = {
  recipient: 'to',
  body: 'template',
  personalizationSubstitutionTags: 'template',
  'recipients[0].to': 'to',
  'sendingDetails.senderFrom.email': 'senderFrom',
  'sendingDetails.senderFrom.displayName': 'senderName',
  'sendingDetails.subject': 'subject',
  'sendingDetails.emailBody': 'template',
};

/**
 * Verify (ARCHITECTURE.md, "Verify (one-time passcodes)"): Herald makes the code, sends it in
 * the passcode lane through `/sms/single`'s checks and routes, keeps only its hash, and checks it.
 */
export function verifyRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const metrics = registerVerifyMetrics(ctx.metrics);
  // Checks at once read their verifications' hashes in one statement, as they write in one
  // transaction (checkVerificationGroup): a read each would leave the database a statement a
  // check where the writes take one a group.
  const hashes = new Gathering<{ id: string; accountId: string }, { code_hash: string; status: string } | undefined>(
    async (group) => {
      const ids = [...new Set(group.map((check) => check.id))];
      const rows = await ctx.database.reads
        .selectFrom('verifications')
        .select(['id', 'account_id', 'code_hash', 'status'])
        .where(isAnyOf(ctx.database.dialect, 'id', ids))
        .execute();
      return group.map(({ id, accountId }) => rows.find((row) => row.id === id && row.account_id === accountId));
    },
    { maxSize: GROUP_SIZE, waitForTurn: SYNCHRONOUS_READS[ctx.database.dialect] },
  );
  const blocked = async (accountId: string, reason: 'country' | 'prefix', country: string, now: number) => {
    metrics.blocked.inc({ reason });
    await ctx.database.call(recordBlocked, { accountId, reason, country, now });
  };

  r.post(
    '/verify',
    {
      config: { ...verify, scope: 'verify' },
      schema: {
        tags,
        summary: 'Send a one-time code by SMS or email; to a recipient with a code pending, a new code',
        body: StartRequest,
        response: { 201: Started, ...errorResponses(400, 401, 413, 415, 422, 429) },
      },
    },
    async (request, reply) => {
      const account = request.account;
      const body = request.body;
      const now = ctx.clock.now();
      const template = body.template ?? DEFAULT_TEMPLATE;
      if (!template.includes(CODE_TAG))
        throw badRequest('The verification request is not valid.', [
          { field: 'template', message: `must hold ${CODE_TAG}, where the code goes` },
        ]);
      const channel = body.channel ?? 'sms';
      const to = channel === 'sms' ? mobileFromDigits(body.to) : emailRecipient(body.to);
      if ('problem' in to)
        throw badRequest('The verification request is not valid.', [{ field: 'to', message: to.problem }]);
      const { allowedCountries, prefixLimit } = verifySettings(account.verifySettings);
      // The fraud guard is for numbers: pumping needs revenue-sharing ranges, which mail has none of.
      const country = 'mobile' in to ? countryOfMobile(to.mobile) : '';
      const prefix = 'mobile' in to ? to.mobile.slice(0, to.countryCode.length + 4) : '';
      try {
        // The guard is asked only when the verification starts: a retry with its Idempotency-Key
        // gets the one started, whatever the account's countries have become since.
        const started = await idempotent(request, reply, ctx, account.id, startVerification, async () => {
          if ('mobile' in to && allowedCountries !== null && !allowedCountries.includes(country)) {
            await blocked(account.id, 'country', country, now);
            throw unprocessable('The fraud guard refused the number.', [
              {
                field: 'to',
                message: `is a number of ${country || 'no single country'}, not one of the account's allowedCountries`,
              },
            ]);
          }
          const ttlMs = (body.ttlSeconds ?? 600) * 1000;
          const code = { code: newCode(body.codeLength ?? 6), validUntil: now + ttlMs };
          const message = await codeMessage(ctx, account, { ...body, template }, to, code).catch((error: unknown) => {
            throw withVerifyFields(error);
          });
          return {
            id: newSendId(),
            accountId: account.id,
            channel,
            to: 'mobile' in to ? to.mobile : to.address,
            country,
            prefix,
            prefixLimit,
            codeHash: codeHash(await codeKey(ctx.db, ctx.encryptionKey), code.code),
            ttlMs,
            webhookUrl: body.webHookUrl ?? null,
            message,
            now,
          };
        });
        if (reply.getHeader('idempotent-replayed') === undefined) metrics.started.inc({ channel });
        return started;
      } catch (error) {
        if (isPrefixRefusal(error)) await blocked(account.id, 'prefix', country, now);
        throw error;
      }
    },
  );

  r.post(
    '/verify/:verificationId/check',
    {
      config: { ...verify, scope: 'verify' },
      schema: {
        tags,
        summary: 'Check a code: approved, pending with an attempt fewer, failed at the fifth wrong one, or expired',
        params: Params,
        body: Type.Object({ code: Type.String({ maxLength: 10 }) }),
        response: { 200: Checked, ...errorResponses(400, 401, 404, 415, 429) },
      },
    },
    async (request, reply) => {
      const id = request.params.verificationId;
      const accountId = request.account.id;
      const prepare = async (): Promise<CheckVerification> => {
        const row = await hashes.run({ id, accountId });
        if (!row || !['pending', 'expired'].includes(row.status)) throw notFound('The pending verification');
        const matched = codeMatches(await codeKey(ctx.db, ctx.encryptionKey), request.body.code, row.code_hash);
        return { accountId, id, codeHash: row.code_hash, matched, now: ctx.clock.now() };
      };
      // With an Idempotency-Key, alone with its record: a retry gets the first answer again.
      if (request.headers['idempotency-key'] !== undefined) {
        const answered = await idempotent(request, reply, ctx, accountId, checkVerification, prepare);
        if (reply.getHeader('idempotent-replayed') === undefined) metrics.checks.inc({ status: answered.status });
        return answered;
      }
      const checked = await ctx.database.gather(checkVerificationGroup, await prepare());
      if (!checked) throw notFound('The pending verification');
      metrics.checks.inc({ status: checked.status });
      return { verificationId: id, ...checked };
    },
  );

  r.post(
    '/verify/:verificationId/cancel',
    {
      config: { ...verify, scope: 'verify' },
      schema: {
        tags,
        summary: 'Cancel a pending verification: its code no longer checks',
        params: Params,
        response: { 200: Verification, ...errorResponses(400, 401, 404, 429) },
      },
    },
    async (request) => {
      const now = ctx.clock.now();
      const id = request.params.verificationId;
      const row = await ctx.database.call(cancelVerification, { accountId: request.account.id, id, now });
      if (!row) throw notFound('The verification');
      return verificationView(row, now);
    },
  );

  r.get(
    '/verify/stats',
    {
      config: { ...verify, scope: ['read', 'verify'] },
      schema: {
        tags,
        summary: "Verifications started, approved, failed, expired and blocked over days of the account's zone",
        querystring: Type.Object({ from: Day, to: Day }),
        response: errorResponses(400, 401, 429),
      },
    },
    async (request) =>
      readVerifyStats(ctx.db, {
        accountId: request.account.id,
        offsetMinutes: offsetMinutes(request.account.timeZoneOffset) ?? 0,
        from: request.query.from,
        to: request.query.to,
        now: ctx.clock.now(),
      }),
  );

  r.get(
    '/verify/:verificationId',
    {
      config: { ...verify, scope: ['read', 'verify'] },
      schema: {
        tags,
        summary: 'A verification: its status, sends and checks left',
        params: Params,
        response: { 200: Verification, ...errorResponses(400, 401, 404, 429) },
      },
    },
    async (request) => {
      const id = request.params.verificationId;
      const row = await ownVerification(ctx.db, { accountId: request.account.id, id });
      if (!row) throw notFound('The verification');
      return verificationView(row, ctx.clock.now());
    },
  );
}

/**
 * The code's message in its channel's passcode lane, checked as `/sms/single` or `/email/batch`
 * would check it; an SMS is not handed to an SMSC once the code expired (`validUntil`), nor an
 * email refused for now by the relay tried again.
 */
async function codeMessage(
  ctx: AppContext,
  account: AuthenticatedAccount,
  body: Static<typeof StartRequest> & { template: string },
  to: MobileNumber | { address: string },
  { code, validUntil }: { code: string; validUntil: number },
): Promise<StartVerification['message']> {
  const tags = [{ tagName: CODE_TAG, tagValue: code }];
  if ('mobile' in to) {
    const request = {
      recipient: to.mobile,
      senderName: body.senderName ?? ctx.config.defaultSenderName,
      body: body.template,
      isBodyEncrypted: true,
      personalizationSubstitutionTags: tags,
    };
    const options = { optIn: false, opensInSandbox: true, validUntil };
    return { sms: await prepareSmsRequest(ctx, 'single', request, account, options) };
  }
  const html = `<p>${escapeHtml(body.template).replaceAll('\n', '<br>')}</p>`;
  const request = {
    sendingDetails: {
      senderFrom: {
        email: body.senderFrom ?? `no-reply@${ctx.config.defaultEmailDomain}`,
        displayName: body.senderName ?? '',
      },
      subject: body.subject ?? DEFAULT_SUBJECT,
      emailBody: Buffer.from(html).toString('base64'),
    },
    recipients: [{ to: to.address, personalizationSubstitutionTags: tags }],
  };
  return { email: await prepareEmailRequest(ctx, request, account, { passcode: true, validUntil }) };
}

/** `to` as an email address, lower-cased, or the problem in words. */
function emailRecipient(given: string): { address: string } | { problem: string } {
  const problem = emailAddressProblem(given);
  return problem === undefined ? { address: given.toLowerCase() } : { problem };
}

/** An error of the code's SMS or email request with its fields named as POST /verify's body names them. */
function withVerifyFields(error: unknown): unknown {
  if (!(error instanceof AppError) || error.errors.length === 0) return error;
  const message =
    error.statusCode === 400 ? 'The verification request is not valid.' : 'The code may not be sent as asked.';
  return new AppError(error.statusCode, message, {
    errors: error.errors.map(({ field, message }) => ({ field: FIELD_OF[field] ?? field, message })),
    headers: error.headers,
  });
}
