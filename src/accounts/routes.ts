import { Type } from 'typebox';
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { AppContext } from '../context.ts';
import type { AccessCache } from '../auth/access-cache.ts';
import type { AuthenticatedAccount } from '../auth/bearer.ts';
import { WebhookUrl } from '../webhooks/destination.ts';
import { errorResponses, Uuid } from '../http/schemas.ts';
import { idempotent } from '../http/idempotency.ts';
import { RATE_LIMIT_GROUPS } from '../ratelimit/limits.ts';
import {
  accountView,
  deleteAccount,
  findAccountById,
  listAccounts,
  postAccount,
  prepareAccount,
  rotatePrivateToken,
  setPassword,
  updateAccountSettings,
} from './service.ts';
import { badRequest, notFound } from '../errors.ts';
import { shownUrl } from '../url-password.ts';
import { auditBy, type AuditBy } from '../audit/entries.ts';
import { isKnownCountry } from '../crm/mobile-number.ts';
import { checkVerifySettingsChange, verifySettings } from './verify-settings.ts';
import { CLOCK_TIME, quietHoursOf } from './quiet-hours.ts';
import { PasswordAgain, passwordAgain } from '../auth/password-again.ts';

const RateLimits = Type.Object(
  Object.fromEntries(RATE_LIMIT_GROUPS.map((g) => [g, Type.Integer({ minimum: 1, maximum: 1_000_000 })])),
  { description: 'Requests per minute by endpoint group.' },
);
const PartialRateLimits = Type.Partial(RateLimits);

const AccountBody = Type.Object({
  accountId: Type.String({ format: 'uuid' }),
  userName: Type.String(),
  privateToken: Type.Optional(
    Type.String({
      format: 'uuid',
      description: 'Only when it was just made (creation, rotation): the account keeps its hash, so it is shown once.',
    }),
  ),
  timeZoneOffset: Type.String(),
  locale: Type.String(),
  rateLimits: RateLimits,
  createdAt: Type.String({ format: 'date-time' }),
});

const VerifyBody = Type.Object(
  {
    allowedCountries: Type.Union([Type.Array(Type.String({ maxLength: 2 }), { maxItems: 250 }), Type.Null()], {
      description: 'ISO 3166 alpha-2 codes of the countries codes may go to by SMS; null: every country.',
    }),
    prefixLimit: Type.Integer({
      minimum: 1,
      maximum: 1_000_000,
      description: 'Verifications in 10 minutes to numbers sharing their calling code and first 4 digits.',
    }),
  },
  { description: "Verify's fraud guard." },
);

const ClockTime = (description: string) =>
  Type.String({ pattern: CLOCK_TIME, errorMessage: 'must be a time of day as HH:MM, 00:00 to 23:59', description });

const QuietHoursBody = Type.Union(
  [
    Type.Object(
      {
        start: ClockTime('When quiet hours begin in the recipient\'s zone, "HH:MM" (24-hour).'),
        end: ClockTime('When they end, "HH:MM": before start, the window crosses midnight (21:00 to 08:00).'),
      },
      { additionalProperties: false },
    ),
    Type.Null(),
  ],
  {
    description:
      "A batch SMS due inside its recipient's local quiet hours waits for their end (status Scheduled, " +
      'reason `quiet hours`, `dueAt`); `/sms/single`, Verify and email never wait. null: off, the default.',
  },
);

export const AccountParams = Type.Object({ accountId: Uuid() });

const admin = { auth: 'admin' as const };

/**
 * The operator's admin API (ARCHITECTURE.md), behind ADMIN_TOKEN, and the account's own
 * read of its settings. Route table first; handlers only parse, call the service, answer.
 */
export function accountRoutes(app: FastifyInstance, ctx: AppContext, accessCache: AccessCache): void {
  /** The operator's changes to an account, as its audit log records them. */
  const byAdmin = (ip: string): AuditBy => ({ actor: 'admin', ip, at: ctx.clock.now() });
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const askPassword = passwordAgain(ctx);
  const tags = ['admin'];

  const OwnAccount = Type.Object({
    accountId: Type.String(),
    userName: Type.String(),
    timeZoneOffset: Type.String(),
    locale: Type.String(),
    rateLimits: RateLimits,
    inboundSmsWebhookUrl: Type.Union([Type.String(), Type.Null()]),
    verify: VerifyBody,
    smartEncoding: Type.Boolean(),
    quietHours: QuietHoursBody,
  });
  const ownAccount = ({
    id,
    userName,
    timeZoneOffset,
    locale,
    rateLimits,
    inboundSmsWebhookUrl,
    verifySettings: verify,
    smartEncoding,
    quietHours,
  }: AuthenticatedAccount) => ({
    accountId: id,
    userName,
    timeZoneOffset,
    locale,
    rateLimits,
    inboundSmsWebhookUrl: inboundSmsWebhookUrl === null ? null : shownUrl(inboundSmsWebhookUrl),
    verify: verifySettings(verify),
    smartEncoding,
    quietHours: quietHoursOf(quietHours),
  });

  r.get(
    '/account',
    {
      config: { auth: 'account', rateLimitGroup: 'account', scope: 'read' },
      schema: {
        tags: ['account'],
        summary: "The calling account's settings",
        response: { 200: OwnAccount, ...errorResponses(401, 429) },
      },
    },
    async (request) => ownAccount(request.account),
  );

  r.patch(
    '/account',
    {
      config: { auth: 'account', rateLimitGroup: 'account', scope: 'account' },
      schema: {
        tags: ['account'],
        summary:
          "Change the calling account's own settings, only the fields given: its time zone and locale, where " +
          "messages from handsets (MO) are posted, Verify's fraud guard, smart encoding and quiet hours",
        body: Type.Object(
          {
            timeZoneOffset: Type.Optional(
              Type.String({ maxLength: 120, description: 'Such as UTC+05:30~India Standard Time.' }),
            ),
            locale: Type.Optional(Type.String({ maxLength: 35 })),
            inboundSmsWebhookUrl: Type.Optional(
              Type.Union([
                WebhookUrl(
                  "Receives each message a handset sends to this account's numbers or replies to its messages " +
                    '(`sms.inbound`), signed; null stops the posts.',
                ),
                Type.Null(),
              ]),
            ),
            verify: Type.Optional(Type.Partial(VerifyBody)),
            smartEncoding: Type.Optional(
              Type.Boolean({
                description:
                  'Typographic look-alikes (curly quotes, dashes, the ellipsis, odd spaces) go in GSM-7 forms ' +
                  'when the whole text then is GSM-7.',
              }),
            ),
            quietHours: Type.Optional(QuietHoursBody),
            password: PasswordAgain,
          },
          { minProperties: 1, errorMessage: 'must give at least one setting' },
        ),
        response: { 200: OwnAccount, ...errorResponses(400, 401, 403, 415, 422, 429) },
      },
    },
    async (request) => {
      const { timeZoneOffset, locale, inboundSmsWebhookUrl, verify, smartEncoding, quietHours } = request.body;
      const account = request.account;
      if (inboundSmsWebhookUrl != null)
        await askPassword(request, request.body.password, 'set where messages from handsets are posted');
      if (verify) checkVerifySettingsChange(verify, isKnownCountry);
      const settings = { timeZoneOffset, locale, inboundSmsWebhookUrl, verify, smartEncoding, quietHours };
      if (Object.values(settings).every((value) => value === undefined))
        throw badRequest('The request is not valid.', [{ field: '', message: 'must give at least one setting' }]);
      const row = await updateAccountSettings(
        ctx.db,
        ctx.clock,
        account.id,
        settings,
        auditBy(request, ctx.clock.now()),
      );
      accessCache.forget(account.id);
      return ownAccount({
        ...account,
        timeZoneOffset: row.time_zone_offset,
        locale: row.locale,
        inboundSmsWebhookUrl: row.inbound_sms_webhook_url,
        verifySettings: row.verify,
        smartEncoding: Boolean(row.smart_encoding),
        quietHours: row.quiet_hours,
      });
    },
  );

  if (!ctx.config.adminToken) return;

  r.post(
    '/admin/accounts',
    {
      config: admin,
      schema: {
        tags,
        summary: 'Create an account',
        body: Type.Object({
          userName: Type.String({ minLength: 1, maxLength: 254 }),
          password: Type.String({ minLength: 1, maxLength: 1024 }),
          timeZoneOffset: Type.Optional(Type.String({ maxLength: 120 })),
          locale: Type.Optional(Type.String({ maxLength: 35 })),
        }),
        response: { 201: AccountBody, ...errorResponses(400, 401, 409, 415, 422) },
      },
    },
    async (request, reply) =>
      idempotent(request, reply, ctx, 'admin', postAccount, async () => ({
        ...(await prepareAccount(ctx.clock, request.body)),
        by: byAdmin(request.ip),
      })),
  );

  r.get(
    '/admin/accounts',
    {
      config: admin,
      schema: {
        tags,
        summary: 'List accounts',
        response: { 200: Type.Object({ accounts: Type.Array(AccountBody) }), ...errorResponses(401) },
      },
    },
    async () => ({ accounts: (await listAccounts(ctx.db)).map((row) => accountView(row)) }),
  );

  r.get(
    '/admin/accounts/:accountId',
    {
      config: admin,
      schema: {
        tags,
        summary: 'Read an account',
        params: AccountParams,
        response: { 200: AccountBody, ...errorResponses(401, 404) },
      },
    },
    async (request) => {
      const row = await findAccountById(ctx.db, request.params.accountId);
      if (!row) throw notFound('The account');
      return accountView(row);
    },
  );

  r.patch(
    '/admin/accounts/:accountId',
    {
      config: admin,
      schema: {
        tags,
        summary: "Change an account's time zone, locale or rate limits",
        params: AccountParams,
        body: Type.Object(
          {
            timeZoneOffset: Type.Optional(Type.String()),
            locale: Type.Optional(Type.String()),
            rateLimits: Type.Optional(PartialRateLimits),
          },
          { minProperties: 1 },
        ),
        response: { 200: AccountBody, ...errorResponses(400, 401, 404) },
      },
    },
    async (request) => {
      const { accountId } = request.params;
      const row = await updateAccountSettings(ctx.db, ctx.clock, accountId, request.body, byAdmin(request.ip));
      accessCache.forget(row.id);
      return accountView(row);
    },
  );

  r.delete(
    '/admin/accounts/:accountId',
    {
      config: admin,
      schema: {
        tags,
        summary: 'Delete an account and everything it owns',
        params: AccountParams,
        response: { ...errorResponses(401, 404) },
      },
    },
    async (request, reply) => {
      await deleteAccount(ctx.db, request.params.accountId);
      accessCache.forget(request.params.accountId);
      return reply.code(204).send();
    },
  );

  r.post(
    '/admin/accounts/:accountId/rotate-private-token',
    {
      config: admin,
      schema: {
        tags,
        summary: 'Issue a new private token; revokes every access token',
        params: AccountParams,
        response: { 200: AccountBody, ...errorResponses(401, 404) },
      },
    },
    async (request) => {
      const row = await rotatePrivateToken(ctx.db, ctx.clock, request.params.accountId, byAdmin(request.ip));
      accessCache.forget(row.id);
      return accountView(row, row.privateToken);
    },
  );

  r.put(
    '/admin/accounts/:accountId/password',
    {
      config: admin,
      schema: {
        tags,
        summary: 'Set a new password; revokes every access token',
        params: AccountParams,
        body: Type.Object({ password: Type.String({ minLength: 1, maxLength: 1024 }) }),
        response: { 200: AccountBody, ...errorResponses(400, 401, 404) },
      },
    },
    async (request) => {
      const { accountId } = request.params;
      const row = await setPassword(ctx.db, ctx.clock, accountId, request.body.password, byAdmin(request.ip));
      accessCache.forget(row.id);
      return accountView(row);
    },
  );
}
