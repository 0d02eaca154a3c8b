import { Type } from 'typebox';
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { AppContext } from '../context.ts';
import { notFound } from '../errors.ts';
import { errorResponses } from '../http/schemas.ts';
import { idempotent } from '../http/idempotency.ts';
import { findBatch, prepareBatch, recordBatch } from './batches.ts';
import { checkBatchRequest } from './validate.ts';
import { findContact, listContactsPage, preparePatch, searchContacts } from './contacts.ts';
import { patchContact, postListMembers, removeListMember, renameList } from './manage.ts';
import { listLists, listProperties, postList, postProperty } from './setup.ts';
import {
  BatchIdParams,
  BatchStatus,
  Contact,
  ContactBatchAccepted,
  ContactBatchRequest,
  ContactIdParams,
  ContactPatch,
  ContactSearch,
  ListBody,
  ListIdParams,
  ListMemberParams,
  ListMembersAdded,
  ListMembersBody,
  Page,
  PropertyBody,
  PropertyName,
} from './schemas.ts';

const contacts = { auth: 'account', rateLimitGroup: 'contacts' } as const;
const tags = ['crm'];

/** The CRM's API (SPEC §2.6, ARCHITECTURE.md "setup objects"): route table first, handlers only call the service. */
export function crmRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();

  r.post(
    '/contacts/batch',
    {
      config: { ...contacts, scope: 'contacts:write', refusalData: { InvalidProperties: [], InvalidContactIds: [] } },
      schema: {
        tags,
        summary: 'Create or update up to 1000 contacts, applied asynchronously',
        body: ContactBatchRequest,
        response: { 202: ContactBatchAccepted, ...errorResponses(400, 401, 413, 415, 422, 429) },
      },
    },
    async (request, reply) => {
      const checked = await checkBatchRequest(request.body);
      return idempotent(request, reply, ctx, request.account.id, recordBatch, () =>
        prepareBatch(
          ctx.database.reads,
          { dialect: ctx.database.dialect, clock: ctx.clock },
          request.account.id,
          request.body,
          checked,
        ),
      );
    },
  );

  r.get(
    '/contacts/batch/:batchId',
    {
      config: { ...contacts, scope: 'read' },
      schema: {
        tags,
        summary: "A contact batch's status and its inserted, updated and skipped contacts",
        params: BatchIdParams,
        response: { 200: BatchStatus, ...errorResponses(400, 401, 404, 429) },
      },
    },
    async (request) => findBatch(ctx.db, request.account.id, request.params.batchId),
  );

  r.get(
    '/contacts',
    {
      config: { ...contacts, scope: 'read' },
      schema: {
        tags,
        summary: 'Contacts by email and/or mobile',
        querystring: ContactSearch,
        response: { 200: Type.Object({ contacts: Type.Array(Contact) }), ...errorResponses(400, 401, 429) },
      },
    },
    async (request) => ({ contacts: await searchContacts(ctx.db, request.account.id, request.query) }),
  );

  r.get(
    '/contacts/:contactId',
    {
      config: { ...contacts, scope: 'read' },
      schema: {
        tags,
        summary: 'One contact',
        params: ContactIdParams,
        response: { 200: Contact, ...errorResponses(400, 401, 404, 429) },
      },
    },
    async (request) => findContact(ctx.db, request.account.id, Number(request.params.contactId)),
  );

  r.patch(
    '/contacts/:contactId',
    {
      config: { ...contacts, scope: 'contacts:write' },
      schema: {
        tags,
        summary: "Change a contact's fields, checked as the contact batch checks them; those absent keep their value",
        params: ContactIdParams,
        body: ContactPatch,
        response: { 200: Contact, ...errorResponses(400, 401, 404, 415, 422, 429) },
      },
    },
    async (request) => {
      const accountId = request.account.id;
      const contactId = Number(request.params.contactId);
      const deps = { dialect: ctx.database.dialect, clock: ctx.clock };
      const patch = await preparePatch(ctx.database.reads, deps, accountId, contactId, request.body);
      if ((await ctx.database.call(patchContact, patch)) === 'not found') throw notFound('The contact');
      return findContact(ctx.db, accountId, contactId);
    },
  );

  r.post(
    '/contacts/properties',
    {
      config: { ...contacts, scope: 'contacts:write' },
      schema: {
        tags,
        summary: 'Create a contact property',
        body: Type.Object({ propertyname: PropertyName() }),
        response: { 201: PropertyBody, ...errorResponses(400, 401, 409, 415, 422, 429) },
      },
    },
    async (request, reply) =>
      idempotent(request, reply, ctx, request.account.id, postProperty, () => ({
        accountId: request.account.id,
        name: request.body.propertyname,
        now: ctx.clock.now(),
      })),
  );

  r.get(
    '/contacts/properties',
    {
      config: { ...contacts, scope: 'read' },
      schema: {
        tags,
        summary: "The account's contact properties",
        response: { 200: Type.Object({ properties: Type.Array(PropertyBody) }), ...errorResponses(401, 429) },
      },
    },
    async (request) => ({ properties: await listProperties(ctx.db, request.account.id) }),
  );

  r.post(
    '/lists',
    {
      config: { ...contacts, scope: 'contacts:write' },
      schema: {
        tags,
        summary: 'Create a contact list',
        body: Type.Object({ name: Type.String() }),
        response: { 201: ListBody, ...errorResponses(400, 401, 409, 415, 422, 429) },
      },
    },
    async (request, reply) =>
      idempotent(request, reply, ctx, request.account.id, postList, () => ({
        accountId: request.account.id,
        name: request.body.name,
        now: ctx.clock.now(),
      })),
  );

  r.get(
    '/lists',
    {
      config: { ...contacts, scope: 'read' },
      schema: {
        tags,
        summary: "The account's lists, `All contacts` first",
        response: { 200: Type.Object({ lists: Type.Array(ListBody) }), ...errorResponses(401, 429) },
      },
    },
    async (request) => ({ lists: await listLists(ctx.db, request.account.id) }),
  );

  r.patch(
    '/lists/:listId',
    {
      config: { ...contacts, scope: 'contacts:write' },
      schema: {
        tags,
        summary: 'Rename a list (not `All contacts`), by the name rules of POST /lists',
        params: ListIdParams,
        body: Type.Object({ name: Type.String() }, { additionalProperties: false }),
        response: { 200: ListBody, ...errorResponses(400, 401, 404, 409, 415, 429) },
      },
    },
    async (request) =>
      ctx.database.call(renameList, {
        accountId: request.account.id,
        listId: request.params.listId,
        name: request.body.name,
      }),
  );

  r.post(
    '/lists/:listId/contacts',
    {
      config: { ...contacts, scope: 'contacts:write' },
      schema: {
        tags,
        summary: 'Add existing contacts to a list, up to 1000; an id the account does not have adds none (422)',
        params: ListIdParams,
        body: ListMembersBody,
        response: { 200: ListMembersAdded, ...errorResponses(400, 401, 404, 413, 415, 422, 429) },
      },
    },
    async (request, reply) =>
      idempotent(request, reply, ctx, request.account.id, postListMembers, () => ({
        accountId: request.account.id,
        listId: request.params.listId,
        contactIds: request.body.contactIds,
        now: ctx.clock.now(),
      })),
  );

  r.delete(
    '/lists/:listId/contacts/:contactId',
    {
      config: { ...contacts, scope: 'contacts:write' },
      schema: {
        tags,
        summary: 'Take a contact off a list (204); the contact stays',
        params: ListMemberParams,
        response: errorResponses(400, 401, 404, 409, 429),
      },
    },
    async (request, reply) => {
      await ctx.database.call(removeListMember, {
        accountId: request.account.id,
        listId: request.params.listId,
        contactId: Number(request.params.contactId),
      });
      return reply.code(204).send();
    },
  );

  r.get(
    '/lists/:listId/contacts',
    {
      config: { ...contacts, scope: 'read' },
      schema: {
        tags,
        summary: 'The contacts of a list, a page at a time',
        params: ListIdParams,
        querystring: Page,
        response: {
          200: Type.Object({ contacts: Type.Array(Contact), nextCursor: Type.Union([Type.String(), Type.Null()]) }),
          ...errorResponses(400, 401, 404, 429),
        },
      },
    },
    async (request) =>
      listContactsPage(ctx.db, request.account.id, request.params.listId, {
        limit: Number(request.query.limit ?? 100),
        cursor: request.query.cursor,
      }),
  );
}
