import { randomUUID } from 'node:crypto';
import type { Kysely, Selectable } from 'kysely';
import { recordAudit, type AuditBy } from '../audit/entries.ts';
import { isoOrNull } from '../clock.ts';
import type { Schema, WebhookEndpointsTable } from '../db/schema.ts';
import { conflict } from '../errors.ts';
import { shownUrl } from '../url-password.ts';
import { postProcedure } from '../http/idempotency.ts';

/**
 * Account-wide webhook endpoints (ARCHITECTURE.md, "Access and integration"): URLs where every
 * event of the types an endpoint subscribes to is posted, besides the per-request URL the
 * event's send, batch or verification named. Fan-out happens where events are appended
 * (events.ts), in the appender's transaction, so an endpoint's posts are gathered, signed,
 * retried and replayed exactly as a per-request URL's are, in deliveries of its own.
 */

/** The event types an endpoint may take, in this order wherever they are listed. */
export const ENDPOINT_EVENTS = [
  'sms.status',
  'email.events',
  'contacts.batch',
  'sms.inbound',
  'verify.status',
] as const;
export type EndpointEvent = (typeof ENDPOINT_EVENTS)[number];

/**
 * Endpoints an account may have at once: each one is a stream of every subscribed event, so
 * an account with ten endpoints on `sms.status` makes eleven posts of each status batch.
 * Beyond it, POST answers 409 (the account's state stands in the way, not the request).
 */
export const MAX_ENDPOINTS = 10;

/**
 * The URL as compared: WHATWG's serialisation lowers the scheme and host, drops a default port
 * and an empty path's missing slash, so `HTTP://LocalHost:80` and `http://localhost/` are one
 * receiver; a #fragment, which is never sent, and an empty `?` go too. The path and query stay
 * as written: servers may tell their case apart. A string that does not parse is kept as it is
 * (it never equals a stored endpoint, which parsed).
 */
export function normaliseUrl(url: string): string {
  const parsed = URL.parse(url);
  if (!parsed) return url;
  parsed.hash = '';
  // `search` reads '' both for no query and for a lone `?`; setting it drops the `?`.
  if (parsed.search === '') parsed.search = '';
  return parsed.href;
}

export interface Endpoint {
  id: string;
  url: string;
  events: EndpointEvent[];
  createdAt: number;
  /** When its receiver answered 410 Gone; null while it takes events. */
  disabledAt: number | null;
}

export interface EndpointView {
  endpointId: string;
  url: string;
  events: EndpointEvent[];
  createdAt: string;
  disabledAt: string | null;
}

export function endpointView(endpoint: Endpoint): EndpointView {
  return {
    endpointId: endpoint.id,
    url: shownUrl(endpoint.url),
    events: endpoint.events,
    createdAt: new Date(endpoint.createdAt).toISOString(),
    disabledAt: isoOrNull(endpoint.disabledAt),
  };
}

function fromRow(row: Selectable<WebhookEndpointsTable>): Endpoint {
  return {
    id: row.id,
    url: row.url,
    events: JSON.parse(row.events) as EndpointEvent[],
    createdAt: row.created_at,
    disabledAt: row.disabled_at,
  };
}

/** The account's endpoints, oldest first. */
export async function listEndpoints(db: Kysely<Schema>, accountId: string): Promise<Endpoint[]> {
  const rows = await db
    .selectFrom('webhook_endpoints')
    .selectAll()
    .where('account_id', '=', accountId)
    .orderBy('created_at')
    .orderBy('id')
    .execute();
  return rows.map(fromRow);
}

/**
 * The normalised URLs of the account's endpoints that take events of `type`, none disabled, in
 * the caller's transaction (one indexed read of at most MAX_ENDPOINTS rows), each once.
 */
export async function subscribedUrls(db: Kysely<Schema>, accountId: string, type: string): Promise<string[]> {
  const rows = await db
    .selectFrom('webhook_endpoints')
    .select(['url', 'events'])
    .where('account_id', '=', accountId)
    .where('disabled_at', 'is', null)
    .execute();
  const urls = new Set<string>();
  // Normalised again: a row kept before the normal form dropped a #fragment still names its receiver once.
  for (const row of rows) if ((JSON.parse(row.events) as string[]).includes(type)) urls.add(normaliseUrl(row.url));
  return [...urls];
}

/** Whether the account has any endpoint taking events, of whatever types. */
export async function hasEndpoints(db: Kysely<Schema>, accountId: string): Promise<boolean> {
  const row = await db
    .selectFrom('webhook_endpoints')
    .select('id')
    .where('account_id', '=', accountId)
    .where('disabled_at', 'is', null)
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

export interface NewEndpoint extends Endpoint {
  accountId: string;
  /** Who asked, for the audit log. */
  by: AuditBy;
}

/** Made before the transaction, so a replay of the request (Idempotency-Key) finds the same. */
export function prepareEndpoint(
  accountId: string,
  body: { url: string; events: readonly EndpointEvent[] },
  now: number,
  by: AuditBy,
): NewEndpoint {
  return {
    by,
    id: randomUUID(),
    accountId,
    url: normaliseUrl(body.url),
    events: ENDPOINT_EVENTS.filter((type) => body.events.includes(type)),
    createdAt: now,
    disabledAt: null,
  };
}

/**
 * POST /webhooks/endpoints, in the request's transaction: 409 when the account already has
 * MAX_ENDPOINTS, or one with the same normalised URL (change its events by deleting it and
 * creating it again). On PostgreSQL the account's row is locked first, so two requests at
 * once cannot both pass the count; SQLite runs one write transaction at a time.
 */
export const postEndpoint = postProcedure(
  import.meta.url,
  'postEndpoint',
  async ({ db, dialect }, endpoint: NewEndpoint) => {
    if (dialect === 'postgres') {
      await db.selectFrom('accounts').select('id').where('id', '=', endpoint.accountId).forUpdate().execute();
    }
    const existing = await db
      .selectFrom('webhook_endpoints')
      .select(['url', 'disabled_at'])
      .where('account_id', '=', endpoint.accountId)
      .execute();
    if (existing.length >= MAX_ENDPOINTS) {
      throw conflict(`An account has at most ${MAX_ENDPOINTS} webhook endpoints; delete one first.`, [
        { field: 'url', message: `the account already has ${MAX_ENDPOINTS} endpoints` },
      ]);
    }
    const same = existing.find((row) => normaliseUrl(row.url) === endpoint.url);
    if (same?.disabled_at != null) {
      throw conflict(
        'The account’s webhook endpoint with this URL was disabled when its receiver answered 410 Gone; ' +
          'delete it and create it again to take events there anew.',
        [{ field: 'url', message: 'is a disabled endpoint' }],
      );
    }
    if (same) {
      throw conflict('The account already has a webhook endpoint with this URL.', [
        { field: 'url', message: 'is already an endpoint (URLs are compared normalised)' },
      ]);
    }
    await db
      .insertInto('webhook_endpoints')
      .values({
        id: endpoint.id,
        account_id: endpoint.accountId,
        url: endpoint.url,
        events: JSON.stringify(endpoint.events),
        created_at: endpoint.createdAt,
      })
      .execute();
    await recordAudit(db, {
      ...endpoint.by,
      accountId: endpoint.accountId,
      action: 'webhookEndpoint.created',
      target: endpoint.id,
    });
    return { statusCode: 201, body: endpointView(endpoint) };
  },
);

/** The ids of the account's endpoints at `url` (compared normalised), disabled or taking events. */
async function endpointsAt(db: Kysely<Schema>, accountId: string, url: string, disabled: boolean): Promise<string[]> {
  const receiver = normaliseUrl(url);
  const rows = await db
    .selectFrom('webhook_endpoints')
    .select(['id', 'url'])
    .where('account_id', '=', accountId)
    .where('disabled_at', disabled ? 'is not' : 'is', null)
    .execute();
  return rows.filter((row) => normaliseUrl(row.url) === receiver).map((row) => row.id);
}

/**
 * Whether `url` is one of the account's endpoints disabled by a 410 Gone: a replay of a
 * delivery there is refused, as a new endpoint at the URL is, until the endpoint is deleted and
 * made again.
 */
export const isDisabledEndpoint = async (db: Kysely<Schema>, accountId: string, url: string): Promise<boolean> =>
  (await endpointsAt(db, accountId, url, true)).length > 0;

/**
 * Deletes the account's endpoint: false if it has none so. Events already appended for it
 * are still gathered and posted (they were the account's when they happened); none after.
 */
export async function deleteEndpoint(db: Kysely<Schema>, accountId: string, id: string, by: AuditBy): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const result = await trx
      .deleteFrom('webhook_endpoints')
      .where('id', '=', id)
      .where('account_id', '=', accountId)
      .executeTakeFirst();
    if (Number(result.numDeletedRows) === 0) return false;
    await recordAudit(trx, { ...by, accountId, action: 'webhookEndpoint.deleted', target: id });
    return true;
  });
}

/**
 * The account's endpoints at `url` (compared normalised: a request's URL written otherwise is the
 * same receiver) disabled, with an entry in its audit log each: their receiver answered 410
 * Gone, which Standard Webhooks has the sender take as "disable the endpoint". Events already
 * gathered for them are still posted (each may be answered 410 in turn).
 */
export async function disableEndpoints(db: Kysely<Schema>, accountId: string, url: string, now: number): Promise<void> {
  for (const id of await endpointsAt(db, accountId, url, false)) {
    const disabled = await db
      .updateTable('webhook_endpoints')
      .set({ disabled_at: now })
      .where('id', '=', id)
      .where('disabled_at', 'is', null)
      .executeTakeFirst();
    // Another 410 at once disabled it first, and wrote the entry.
    if (disabled.numUpdatedRows === 0n) continue;
    await recordAudit(db, {
      actor: 'receiver',
      ip: null,
      at: now,
      accountId,
      action: 'webhookEndpoint.disabled',
      target: id,
    });
  }
}
