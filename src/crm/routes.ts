import { Type } from 'typebox';
import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { AppContext } from '../context.ts';
import { errorResponses } from '../http/schemas.ts';
import { idempotent } from '../http/idempotency.ts';
import { findBatch, prepareBatch, recordBatch } from './batches.ts';
import { checkBatchRequest } from './validate.ts';
import { findContact, listContactsPage, searchContacts } from './contacts.ts';
import { listLists, listProperties, postList, postProperty } from './setup.ts';
import {
  BatchIdParams,
  BatchStatus,
  Contact,
  ContactBatchAccepted,
  ContactBatchRequest,
  ContactIdParams,
  ContactSearch,
  ListBody,
  ListIdParams,
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
      config: contacts,
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
      config: contacts,
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
      config: contacts,
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
      config: contacts,
      schema: {
        tags,
        summary: 'One contact',
        params: ContactIdParams,
        response: { 200: Contact, ...errorResponses(400, 401, 404, 429) },
      },
    },
    async (request) => findContact(ctx.db, request.account.id, Number(request.params.contactId)),
  );

  r.post(
    '/contacts/properties',
    {
      config: contacts,
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
      config: contacts,
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
      config: contacts,
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
      config: contacts,
      schema: {
        tags,
        summary: "The account's lists, `All contacts` first",
        response: { 200: Type.Object({ lists: Type.Array(ListBody) }), ...errorResponses(401, 429) },
      },
    },
    async (request) => ({ lists: await listLists(ctx.db, request.account.id) }),
  );

  r.get(
    '/lists/:listId/contacts',
    {
      config: contacts,
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
      listContactsPage(ctx.db, request.account.id, request.params.listId.toLowerCase(), {
        limit: Number(request.query.limit ?? 100),
        cursor: request.query.cursor,
      }),
  );
}
