import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { AppContext } from '../context.ts';
import { emailAddressProblem } from '../crm/email-address.ts';
import { mobileFromDigits } from '../crm/mobile-number.ts';
import { badRequest } from '../errors.ts';
import { idempotent } from '../http/idempotency.ts';
import { errorResponses } from '../http/schemas.ts';
import { exportPerson } from './export.ts';
import type { Identifier } from './person.ts';
import { erasureRequest, readErasure } from './service.ts';
import { beginErasure } from './erasures.ts';
import { auditBy } from '../audit/entries.ts';
import { ErasureAccepted, ErasureBody, ErasureParams, ErasureRequest, ExportPage, ExportQuery } from './schemas.ts';

const account = { auth: 'account', rateLimitGroup: 'account' } as const;
const tags = ['privacy'];
/** An erasure writes to the CRM's tables: it shares the contacts' limits. */
const erasing = { auth: 'account', rateLimitGroup: 'contacts' } as const;

/**
 * The person asked about, written as sends store them: a mobile as `GET /sms?recipient=` takes
 * it (E.164 digits; 44 07911… is 447911…), an address as `GET /email/batch?email=` (lower-cased).
 */
function identifierOf(query: { mobile?: string; email?: string }): Identifier {
  if ((query.mobile === undefined) === (query.email === undefined)) {
    throw badRequest('Give exactly one of mobile and email.', [
      {
        field: query.mobile === undefined ? 'mobile' : 'email',
        message: 'exactly one of mobile and email is required',
      },
    ]);
  }
  if (query.mobile !== undefined) {
    const number = mobileFromDigits(query.mobile);
    return { mobile: 'mobile' in number ? number.mobile : query.mobile };
  }
  const address = (query.email as string).trim().toLowerCase();
  const problem = emailAddressProblem(address);
  if (problem) throw badRequest(`The email ${problem}.`, [{ field: 'email', message: problem }]);
  return { email: address };
}

/** Data rights (ARCHITECTURE.md, "Data rights and management"; docs/privacy.md): route table first. */
export function privacyRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();

  r.get(
    '/privacy/export',
    {
      config: { ...account, scope: 'privacy' },
      schema: {
        tags,
        summary:
          'Everything the account holds about a person, by mobile or email, for a subject access request: ' +
          'contacts, lists, messages (1,000 a page), clicks, suppressions and replies',
        querystring: ExportQuery,
        response: { 200: ExportPage, ...errorResponses(400, 401, 429) },
      },
    },
    async (request) =>
      exportPerson(ctx.db, ctx.database.dialect, {
        accountId: request.account.id,
        given: identifierOf(request.query),
        now: ctx.clock.now(),
        cursor: request.query.cursor,
      }),
  );

  r.post(
    '/privacy/erasures',
    {
      config: { ...erasing, scope: 'privacy' },
      schema: {
        tags,
        summary:
          'Erase a person: their number or address, and every one their contacts hold, from every message and ' +
          'record of the account, keeping counts; they stay suppressed',
        body: ErasureRequest,
        response: { 202: ErasureAccepted, ...errorResponses(400, 401, 422, 429) },
      },
    },
    async (request, reply) => {
      const given = identifierOf(request.body);
      const by = auditBy(request, ctx.clock.now());
      const accountId = request.account.id;
      return idempotent(request, reply, ctx, accountId, beginErasure, () => erasureRequest(ctx, accountId, given, by));
    },
  );

  r.get(
    '/privacy/erasures/:erasureId',
    {
      config: { ...erasing, scope: 'privacy' },
      schema: {
        tags,
        summary: 'An erasure: whether it is done, and how many contacts and messages it erased',
        params: ErasureParams,
        response: { 200: ErasureBody, ...errorResponses(400, 401, 404, 429) },
      },
    },
    async (request) => readErasure(ctx.db, request.account.id, request.params.erasureId),
  );
}
