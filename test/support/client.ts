import assert from 'node:assert/strict';
import type { FastifyServerOptions, LightMyRequestResponse } from 'fastify';
import type { ManualClock } from '../../src/clock.ts';
import type { DialectName } from '../../src/db/database.ts';
import { createWorker } from '../../src/server/worker.ts';
import type { Worker } from '../../src/queue/worker.ts';
import type { ContactView } from '../../src/crm/contacts.ts';
import { bearer, startTestApp, type TestAccount, type TestApp } from './app.ts';

export interface ContactInput {
  contactId?: number;
  mobileCountryCode?: string | number;
  mobileNumber?: string | number;
  email?: string;
  mobileOptIn?: boolean | string | null;
  emailOptIn?: boolean | string | null;
  propertyfields?: Array<{ propertyid?: string; propertyname?: string; propertyvalue: unknown }>;
  [other: string]: unknown;
}

let sequence = 0;

/** A valid Indian mobile (+91 98xxxxxxxx), different on every call. */
export function buildMobile(): { mobileCountryCode: string; mobileNumber: string } {
  const mobileNumber = `98${String(10_000_000 + (++sequence % 90_000_000)).padStart(8, '0')}`;
  return { mobileCountryCode: '91', mobileNumber };
}

export function buildEmail(): string {
  return `contact${++sequence}-${process.pid}@example.com`;
}

/** A contact with a fresh email and mobile; `overrides` replace or (as undefined) drop fields. */
export function buildContact(overrides: ContactInput = {}): ContactInput {
  const contact: ContactInput = { email: buildEmail(), ...buildMobile(), ...overrides };
  for (const key of Object.keys(contact)) if (contact[key] === undefined) delete contact[key];
  return contact;
}

/** One account's view of the API, as a customer calls it: sends, contacts, lists, properties. */
export interface ApiClient {
  account: TestAccount;
  token: string;
  postBatch(
    body: unknown,
    options?: { contentType?: string; idempotencyKey?: string },
  ): Promise<LightMyRequestResponse>;
  /** Posts the batch, expects 202, runs the queue until it is idle, and answers the batch status. */
  upsert(contacts: ContactInput[], extra?: Record<string, unknown>): Promise<BatchStatus>;
  get(url: string): Promise<LightMyRequestResponse>;
  post(url: string, payload: unknown): Promise<LightMyRequestResponse>;
  /** Posts a send (`/sms/…`, `/email/batch`), expects 202, and answers its QueueId or BatchId. */
  accept(url: string, payload: object): Promise<string>;
  contact(contactId: number): Promise<Contact>;
  createProperty(name: string): Promise<string>;
  createList(name: string): Promise<string>;
}

export interface Outcome {
  count: number;
  contactIds: number[];
}

export interface BatchStatus {
  batchId: string;
  status: string;
  listId: string;
  contacts: number;
  inserted: Outcome;
  updated: Outcome;
  skipped: Outcome;
  error: string | null;
}

export type Contact = ContactView;

export interface ApiTest {
  t: TestApp;
  clock: ManualClock;
  worker: Worker;
  /** Runs every queued job (batches, then their webhook posts) until none is left. */
  drain(): Promise<number>;
  client(): Promise<ApiClient>;
  close(): Promise<void>;
}

export interface ApiTestOptions {
  clock?: ManualClock;
  /** The app's, which the worker logs through too (off by default). */
  logger?: FastifyServerOptions['logger'];
  /** Configuration beside the tests' own. */
  env?: Record<string, string>;
}

/** An app on a fresh database with its worker, for tests of any module through the API. */
export async function startApiTest(dialect: DialectName, options: ApiTestOptions = {}): Promise<ApiTest> {
  const env = { WEBHOOK_ALLOW_PRIVATE: 'true', ...options.env };
  const t = await startTestApp(dialect, { clock: options.clock, logger: options.logger, env });
  const worker = createWorker(t.ctx, { log: t.app.log });
  const drain = () => worker.drain();
  return {
    t,
    clock: t.clock,
    worker,
    drain,
    async client() {
      const account = await t.createAccount();
      const token = await t.tokenFor(account);
      const auth = bearer(token);
      const get = (url: string) => t.app.inject({ method: 'GET', url, headers: auth });
      const post = (url: string, payload: unknown) =>
        t.app.inject({ method: 'POST', url, headers: auth, payload: payload as object });
      const postBatch: ApiClient['postBatch'] = (body, opts = {}) =>
        t.app.inject({
          method: 'POST',
          url: '/contacts/batch',
          headers: {
            ...auth,
            'content-type': opts.contentType ?? 'application/json',
            ...(opts.idempotencyKey ? { 'idempotency-key': opts.idempotencyKey } : {}),
          },
          payload: JSON.stringify(body),
        });
      return {
        account,
        token,
        postBatch,
        get,
        post,
        async accept(url, payload) {
          const response = await post(url, payload);
          if (response.statusCode !== 202) {
            throw new Error(`POST ${url} answered ${response.statusCode}: ${response.body}`);
          }
          const { data } = response.json();
          return (data.QueueId ?? data.BatchId) as string;
        },
        async upsert(contacts, extra = {}) {
          const accepted = await postBatch({ createUpdateContacts: contacts, ...extra });
          if (accepted.statusCode !== 202) {
            throw new Error(`POST /contacts/batch answered ${accepted.statusCode}: ${accepted.body}`);
          }
          await drain();
          const status = await get(`/contacts/batch/${accepted.json().data.BatchId}`);
          return status.json() as BatchStatus;
        },
        async contact(contactId) {
          const response = await get(`/contacts/${contactId}`);
          if (response.statusCode !== 200) {
            throw new Error(`GET /contacts/${contactId} answered ${response.statusCode}: ${response.body}`);
          }
          return response.json() as Contact;
        },
        async createProperty(name) {
          const response = await post('/contacts/properties', { propertyname: name });
          if (response.statusCode !== 201) {
            throw new Error(`POST /contacts/properties answered ${response.statusCode}: ${response.body}`);
          }
          return response.json().propertyid as string;
        },
        async createList(name) {
          const response = await post('/lists', { name });
          if (response.statusCode !== 201) {
            throw new Error(`POST /lists answered ${response.statusCode}: ${response.body}`);
          }
          return response.json().listId as string;
        },
      };
    },
    close: () => t.close(),
  };
}

/** A refusal in the contract's error shape (SPEC): JSON `{ status: 'Failure', message, errors }` with `status`. */
export function assertFailure(response: LightMyRequestResponse, status: number, message: RegExp): void {
  assert.equal(response.statusCode, status, response.body);
  assert.match(response.headers['content-type'] as string, /^application\/json/);
  const body = response.json();
  assert.equal(body.status, 'Failure');
  assert.match(body.message, message);
  assert.ok(Array.isArray(body.errors));
}
