import { Type } from 'typebox';
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { AppContext } from '../context.ts';
import { errorResponses, Uuid } from '../http/schemas.ts';
import { AccountParams } from '../accounts/routes.ts';
import type { AuditBy } from '../audit/entries.ts';
import { addSenderName, listSenderNames } from './names.ts';
import { addSenderDomain, listSenderDomains, senderDomainHolder } from './domains.ts';
import { dkimDomainView, listDkimKeys, removeDkimKey, rotateDkimKey } from './dkim-keys.ts';

const SenderDomainParams = Type.Object({
  accountId: Uuid(),
  domain: Type.String({
    pattern: '^[A-Za-z0-9.-]{1,253}$',
    description: 'A sender domain of the account',
    errorMessage: 'must be a domain name: letters, digits, dots and hyphens',
  }),
});
/** A DNS label, as every selector Herald makes is. */
const Selector = Type.String({
  pattern: '^[A-Za-z0-9-]{1,63}$',
  errorMessage: 'must be a DKIM selector: 1 to 63 letters, digits and hyphens',
});

const DkimRecord = Type.Object({
  selector: Type.String(),
  recordName: Type.String({ description: 'Where to publish the TXT record: <selector>._domainkey.<domain>' }),
  recordValue: Type.String({ description: 'The TXT value: v=DKIM1; k=rsa; p=<base64 public key>' }),
});
const DkimDomain = Type.Object({ domain: Type.String(), dkim: DkimRecord });
const DkimKeys = Type.Object({
  domain: Type.String(),
  keys: Type.Array(
    Type.Object({
      ...DkimRecord.properties,
      active: Type.Boolean({ description: 'true for the key that signs; false for one a rotation retired' }),
      createdAt: Type.String({ format: 'date-time' }),
      retiredAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
    }),
  ),
});

const admin = { auth: 'admin' as const };

/**
 * The operator's admin API for what accounts send as (ARCHITECTURE.md), behind ADMIN_TOKEN:
 * SMS sender names, email sender domains and the DKIM keys of those and of the service's domain.
 */
export function senderRoutes(app: FastifyInstance, ctx: AppContext): void {
  if (!ctx.config.adminToken) return;
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const tags = ['admin'];
  const serviceDomain = ctx.config.defaultEmailDomain;
  /** The operator's changes to an account's senders, as its audit log records them. */
  const byAdmin = (request: { ip: string }): AuditBy => ({ actor: 'admin', ip: request.ip, at: ctx.clock.now() });

  r.post(
    '/admin/accounts/:accountId/sender-names',
    {
      config: admin,
      schema: {
        tags,
        summary:
          'Register a verified SMS sender name (senderName of /sms/single and /sms/batch); a numeric one, ' +
          'which replies are routed by, belongs to one account only (409)',
        params: AccountParams,
        body: Type.Object({ name: Type.String({ minLength: 1, maxLength: 15 }) }),
        response: {
          201: Type.Object({ name: Type.String(), createdAt: Type.String() }),
          ...errorResponses(400, 401, 404, 409),
        },
      },
    },
    async (request, reply) =>
      reply.code(201).send(
        await addSenderName(ctx.db, ctx.clock, {
          accountId: request.params.accountId,
          name: request.body.name,
          by: byAdmin(request),
          defaultSenderName: ctx.config.defaultSenderName,
        }),
      ),
  );

  r.get(
    '/admin/accounts/:accountId/sender-names',
    {
      config: admin,
      schema: {
        tags,
        summary: "An account's sender names",
        params: AccountParams,
        response: { 200: Type.Object({ senderNames: Type.Array(Type.String()) }), ...errorResponses(401) },
      },
    },
    async (request) => ({ senderNames: await listSenderNames(ctx.db, request.params.accountId) }),
  );

  r.post(
    '/admin/accounts/:accountId/sender-domains',
    {
      config: admin,
      schema: {
        tags,
        summary:
          'Authorise an email sender domain for the account: its DKIM key is made, and the DNS TXT record to ' +
          'publish answered',
        params: AccountParams,
        body: Type.Object({ domain: Type.String({ minLength: 1, maxLength: 253 }) }),
        response: { 201: DkimDomain, ...errorResponses(400, 401, 404) },
      },
    },
    async (request, reply) =>
      reply.code(201).send(
        await addSenderDomain(ctx.database, ctx.encryptionKey, ctx.clock, {
          accountId: request.params.accountId,
          domain: request.body.domain,
          serviceDomain,
          by: byAdmin(request),
        }),
      ),
  );

  r.get(
    '/admin/accounts/:accountId/sender-domains',
    {
      config: admin,
      schema: {
        tags,
        summary: "An account's sender domains, each with its active DKIM key's record",
        params: AccountParams,
        response: { 200: Type.Object({ senderDomains: Type.Array(DkimDomain) }), ...errorResponses(401) },
      },
    },
    async (request) => ({
      senderDomains: await listSenderDomains(ctx.database, ctx.encryptionKey, ctx.clock, request.params.accountId),
    }),
  );

  const senderDomain = (params: { accountId: string; domain: string }) =>
    senderDomainHolder(ctx.db, params.accountId, params.domain);

  r.post(
    '/admin/accounts/:accountId/sender-domains/:domain/dkim-rotations',
    {
      config: admin,
      schema: {
        tags,
        summary:
          "Rotate a sender domain's DKIM key: a new key under a new selector signs from now on; the old one " +
          'stays listed, retired, until removed',
        params: SenderDomainParams,
        response: { 201: DkimDomain, ...errorResponses(401, 404) },
      },
    },
    async (request, reply) =>
      reply
        .code(201)
        .send(
          await rotateDkimKey(
            ctx.database,
            ctx.encryptionKey,
            ctx.clock,
            await senderDomain(request.params),
            byAdmin(request),
          ),
        ),
  );

  r.get(
    '/admin/accounts/:accountId/sender-domains/:domain/dkim-keys',
    {
      config: admin,
      schema: {
        tags,
        summary:
          "A sender domain's DKIM keys, the active one first, then those retired, the most recently retired first",
        params: SenderDomainParams,
        response: { 200: DkimKeys, ...errorResponses(401, 404) },
      },
    },
    async (request) => {
      const holder = await senderDomain(request.params);
      return { domain: holder.domain, keys: await listDkimKeys(ctx.db, holder) };
    },
  );

  r.delete(
    '/admin/accounts/:accountId/sender-domains/:domain/dkim-keys/:selector',
    {
      config: admin,
      schema: {
        tags,
        summary: 'Remove a retired DKIM key, once its record is withdrawn from DNS (409 for the active key)',
        params: Type.Object({ ...SenderDomainParams.properties, selector: Selector }),
        response: errorResponses(401, 404, 409),
      },
    },
    async (request, reply) => {
      await removeDkimKey(ctx.db, await senderDomain(request.params), request.params.selector, byAdmin(request));
      return reply.code(204).send();
    },
  );

  const service = { accountId: null, domain: serviceDomain };

  r.get(
    '/admin/dkim',
    {
      config: admin,
      schema: {
        tags,
        summary: "The service domain's (DEFAULT_EMAIL_DOMAIN) DKIM record to publish; its key is made on first need",
        response: { 200: DkimDomain, ...errorResponses(401) },
      },
    },
    async () => dkimDomainView(ctx.database, ctx.encryptionKey, ctx.clock, service),
  );

  r.post(
    '/admin/dkim/rotations',
    {
      config: admin,
      schema: {
        tags,
        summary: "Rotate the service domain's DKIM key, as a sender domain's",
        response: { 201: DkimDomain, ...errorResponses(401) },
      },
    },
    async (request, reply) =>
      reply.code(201).send(await rotateDkimKey(ctx.database, ctx.encryptionKey, ctx.clock, service, byAdmin(request))),
  );

  r.get(
    '/admin/dkim/keys',
    {
      config: admin,
      schema: {
        tags,
        summary: "The service domain's DKIM keys, the active one first, then those retired",
        response: { 200: DkimKeys, ...errorResponses(401) },
      },
    },
    async () => ({ domain: serviceDomain, keys: await listDkimKeys(ctx.db, service) }),
  );

  r.delete(
    '/admin/dkim/keys/:selector',
    {
      config: admin,
      schema: {
        tags,
        summary: 'Remove a retired DKIM key of the service domain (409 for the active key)',
        params: Type.Object({ selector: Selector }),
        response: errorResponses(401, 404, 409),
      },
    },
    async (request, reply) => {
      await removeDkimKey(ctx.db, service, request.params.selector, byAdmin(request));
      return reply.code(204).send();
    },
  );
}
