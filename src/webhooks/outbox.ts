import { randomUUID } from 'node:crypto';
import { sql, type Kysely, type Selectable, type SqlBool } from 'kysely';
import { chunkOf } from '../db/chunks.ts';
import type { ProcedureDatabase } from '../db/procedure.ts';
import { isoOrNull, type Clock } from '../clock.ts';
import type { Schema, WebhookDeliveriesTable } from '../db/schema.ts';
import { conflict, notFound } from '../errors.ts';
import { shownUrl } from '../url-password.ts';
import { cursorCodec } from '../http/cursor.ts';
import { enqueue, enqueueMany, PRIORITY, type NewJob } from '../queue/queue.ts';
import { postProcedure } from '../http/idempotency.ts';
import { isDisabledEndpoint, normaliseUrl, subscribedUrls } from './endpoints.ts';

export type DeliveryRow = Selectable<WebhookDeliveriesTable>;

/** The queue kind whose jobs post one delivery; its payload is a DeliveryJob. */
export const DELIVER_KIND = 'webhook.deliver';

export interface DeliveryJob {
  deliveryId: string;
  generation: number;
}

export interface WebhookEvent {
  accountId: string;
  url: string;
  /** What happened, e.g. `sms.status` or `contacts.batch`. */
  type: string;
  data: unknown;
}

function deliveryJob(row: Pick<DeliveryRow, 'id' | 'account_id' | 'generation'>, now: number): NewJob {
  const payload: DeliveryJob = { deliveryId: row.id, generation: row.generation };
  return {
    kind: DELIVER_KIND,
    payload,
    accountId: row.account_id,
    now,
    idempotencyKey: `${DELIVER_KIND}:${row.id}:${row.generation}`,
    priority: PRIORITY.webhook,
  };
}

/**
 * A post's body, Standard Webhooks' `{type, timestamp, data}`, around `data` already in JSON:
 * a gathered post's events are stored as JSON and go in as they are.
 */
export function webhookBody(type: string, timestamp: number, data: string): string {
  const at = new Date(timestamp).toISOString();
  return `{"type":${JSON.stringify(type)},"timestamp":${JSON.stringify(at)},"data":${data}}`;
}

export interface NewDelivery {
  accountId: string;
  url: string;
  type: string;
  /** The exact body, so every attempt posts and signs the same bytes. */
  body: string;
}

/**
 * Writes the deliveries and queues a post of each, in the caller's transaction: two
 * statements however many. Returns their ids, each the `webhook-id` of all its attempts.
 */
export async function createDeliveries(db: Kysely<Schema>, now: number, deliveries: NewDelivery[]): Promise<string[]> {
  const rows = deliveries.map((delivery) => ({
    id: randomUUID(),
    account_id: delivery.accountId,
    type: delivery.type,
    url: delivery.url,
    payload: delivery.body,
    status: 'pending' as const,
    last_status_code: null,
    last_error: null,
    last_attempt_at: null,
    next_attempt_at: now,
    created_at: now,
    delivered_at: null,
  }));
  if (rows.length === 0) return [];
  await db.insertInto('webhook_deliveries').values(rows).execute();
  await enqueueMany(
    db,
    rows.map((row) => deliveryJob({ ...row, generation: 0 }, now)),
  );
  return rows.map((row) => row.id);
}

/** A delivery whose job died (it kept killing its worker): failed, unless a replay or a post settled it meanwhile. */
export async function abandonDelivery(db: Kysely<Schema>, job: DeliveryJob, error: string): Promise<void> {
  await db
    .updateTable('webhook_deliveries')
    .set({ status: 'failed', last_error: `its job died: ${error}`, next_attempt_at: null })
    .where('id', '=', job.deliveryId)
    .where('generation', '=', job.generation)
    .where('status', '=', 'pending')
    .execute();
}

/**
 * Records an event for its per-request webhook URL (null: none) and for each of the
 * account's endpoints subscribed to its type (endpoints.ts; one whose normalised URL is the
 * per-request one gets it there, once), and queues their deliveries, all in the caller's
 * transaction: the event is posted if and only if the caller's work commits.
 * One post per event and receiver, for an event that stands alone (`contacts.batch`); events
 * that come by the thousand (statuses) are gathered into shared posts by appendWebhookEvents.
 * The body is fixed here (Standard Webhooks' `{type, timestamp, data}`, the timestamp being
 * when the event happened), so every attempt posts and signs the same bytes.
 * Returns the deliveries' ids, each also the `webhook-id` header of every attempt of its post.
 */
export async function emitEvent(
  db: Kysely<Schema>,
  clock: Clock,
  event: Omit<WebhookEvent, 'url'> & { url: string | null },
): Promise<string[]> {
  const now = clock.now();
  const own = event.url ? normaliseUrl(event.url) : null;
  const urls = [
    ...(event.url ? [event.url] : []),
    ...(await subscribedUrls(db, event.accountId, event.type)).filter((url) => url !== own),
  ];
  const body = webhookBody(event.type, now, JSON.stringify(event.data));
  return createDeliveries(
    db,
    now,
    urls.map((url) => ({ accountId: event.accountId, url, type: event.type, body })),
  );
}

/** One post of an event to one URL, not to the account's endpoints: answers its delivery id. */
export async function emitWebhook(db: Kysely<Schema>, clock: Clock, event: WebhookEvent): Promise<string> {
  const now = clock.now();
  const [id] = await createDeliveries(db, now, [
    { ...event, body: webhookBody(event.type, now, JSON.stringify(event.data)) },
  ]);
  return id;
}

/**
 * Posts the delivery again now, with the same `webhook-id` and body, whatever its state.
 * Attempts keep counting: if the replay fails, retries follow whatever is left of the
 * schedule, so replaying a delivery that already gave up makes exactly one attempt.
 * The new generation retires any job still scheduled for the delivery, so one event never
 * has two schedules running.
 */
export async function replayDelivery(
  db: Kysely<Schema>,
  clock: Clock,
  accountId: string,
  id: string,
): Promise<DeliveryRow> {
  const now = clock.now();
  const replayed = await findDelivery(db, accountId, id);
  if (await isDisabledEndpoint(db, accountId, replayed.url)) {
    throw conflict(
      'The delivery’s URL is a webhook endpoint disabled when its receiver answered 410 Gone; ' +
        'delete the endpoint and create it again to post there anew.',
      [{ field: 'id', message: 'is a delivery to a disabled endpoint' }],
    );
  }
  const row = await db
    .updateTable('webhook_deliveries')
    .set((eb) => ({ status: 'pending', generation: eb('generation', '+', 1), next_attempt_at: now }))
    .where('id', '=', id)
    .where('account_id', '=', accountId)
    .returningAll()
    .executeTakeFirst();
  if (!row) throw notFound('The webhook delivery');
  await enqueue(db, deliveryJob(row, now));
  return row;
}

/** POST /webhooks/deliveries/:id/retry, in the request's transaction (http/idempotency.ts). */
export const postDeliveryRetry = postProcedure(
  import.meta.url,
  'postDeliveryRetry',
  async ({ db }, args: { accountId: string; id: string; now: number }) => ({
    statusCode: 202,
    body: deliveryView(await replayDelivery(db, { now: () => args.now }, args.accountId, args.id)),
  }),
);

export async function findDelivery(db: Kysely<Schema>, accountId: string, id: string): Promise<DeliveryRow> {
  const row = await db
    .selectFrom('webhook_deliveries')
    .selectAll()
    .where('id', '=', id)
    .where('account_id', '=', accountId)
    .executeTakeFirst();
  if (!row) throw notFound('The webhook delivery');
  return row;
}

// Pages go by (created_at, id), the listing's order.
const cursor = cursorCodec(['integer', 'uuid']);

/** The account's deliveries, newest first. */
export async function listDeliveries(
  db: Kysely<Schema>,
  accountId: string,
  page: { limit: number; cursor?: string; failing?: boolean },
): Promise<{ deliveries: DeliveryRow[]; nextCursor: string | null }> {
  let query = db.selectFrom('webhook_deliveries').selectAll().where('account_id', '=', accountId);
  // The webhook_deliveries_failing index's condition, word for word and without parameters:
  // SQLite takes a partial index only for a query whose terms imply it as written.
  if (page.failing) query = query.where(sql<boolean>`status <> 'delivered' and attempts > 0`);
  if (page.cursor !== undefined) {
    const [createdAt, id] = cursor.decode(page.cursor);
    query = query.where(({ eb, refTuple, tuple }) => eb(refTuple('created_at', 'id'), '<', tuple(createdAt, id)));
  }
  const rows = await query
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(page.limit + 1)
    .execute();
  const { rows: deliveries, nextCursor } = cursor.page(rows, page.limit, (last) => [last.created_at, last.id]);
  return { deliveries, nextCursor };
}

export interface DeliveryView {
  id: string;
  type: string;
  url: string;
  status: DeliveryRow['status'];
  attempts: number;
  lastStatusCode: number | null;
  lastError: string | null;
  lastAttemptAt: string | null;
  nextAttemptAt: string | null;
  createdAt: string;
  deliveredAt: string | null;
}

export function deliveryView(row: DeliveryRow): DeliveryView {
  return {
    id: row.id,
    type: row.type,
    url: shownUrl(row.url),
    status: row.status,
    attempts: row.attempts,
    lastStatusCode: row.last_status_code,
    lastError: row.last_error,
    lastAttemptAt: isoOrNull(row.last_attempt_at),
    nextAttemptAt: row.status === 'pending' ? isoOrNull(row.next_attempt_at) : null,
    createdAt: new Date(row.created_at).toISOString(),
    deliveredAt: isoOrNull(row.delivered_at),
  };
}

/**
 * Deletes up to `limit` deliveries created before `before` that are no longer pending
 * (delivered, or given up): the account's record of them, and its means to replay them, end
 * with retention. Answers how many it deleted.
 */
export async function purgeSettledDeliveries(
  { db, dialect }: ProcedureDatabase,
  before: number,
  limit: number,
): Promise<number> {
  // A delivery replayed meanwhile is pending again, and stays.
  const settled = sql<SqlBool>`status <> 'pending' and created_at < ${before}`;
  const result = await db
    .deleteFrom('webhook_deliveries')
    .where(settled)
    .where(chunkOf(dialect, 'webhook_deliveries', settled, limit))
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
