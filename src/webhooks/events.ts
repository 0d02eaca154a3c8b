import { createHash } from 'node:crypto';
import type { ExpressionBuilder, Kysely } from 'kysely';
import type { Clock } from '../clock.ts';
import type { Database } from '../db/database.ts';
import { dialectOf } from '../db/dialect.ts';
import { inJson } from '../db/in-json.ts';
import type { Schema } from '../db/schema.ts';
import type { Lease } from '../queue/queries.ts';
import { enqueue, PRIORITY } from '../queue/queue.ts';
import { completeJob, keepJob, SnoozeJob, type JobHandler } from '../queue/worker.ts';
import { normaliseUrl, subscribedUrls } from './endpoints.ts';
import { createDeliveries, webhookBody, type NewDelivery } from './outbox.ts';
import { lockStream, lockStreamShared, lockTaken } from './queries.ts';
import { urlKey } from './url-passwords.ts';
import type { Keyring } from '../sealed.ts';
import { sealedIfClear } from '../url-password.ts';

/**
 * Status events are gathered into shared posts (ARCHITECTURE.md, "at most 1 second or 500
 * events"), so 100,000 messages with three status changes each make 600 posts, not 300,000.
 *
 * The protocol, per stream (one account, one URL, one type):
 *  - appendWebhookEvents writes the events, in the caller's transaction and in one row,
 *    and queues the stream's gather job under a key of the stream's own: a job already queued
 *    (or running) for the stream makes that a no-op, so a stream has one gather job at a time;
 *  - the gather job, GATHER_WINDOW_MS after the stream's first event, deletes the stream's
 *    events and writes the deliveries carrying them (500 a post, in append order) in one
 *    transaction, and completes itself in that same transaction (completeJob).
 * Events and the delivery that takes them commit together, so after a crash an event is
 * either still waiting, with its gather job to run again when the lease lapses, or in
 * exactly one delivery, which deliver.ts posts and retries like any other.
 *
 * A row holds one append's events (a JSON array), not one event: a page of 500 results
 * writes one row and one index entry. Row per event, with the events unpacked from one JSON
 * parameter in SQL, cost 37 µs an event appended and 27 gathered on PostgreSQL here (a
 * foreign-key check and an index entry per event, 5,000 rows deleted per run); row per
 * append, 8 and 11 (bench/webhook-events.ts). A gather cuts through an append when the
 * post is full, and the rest stays in its row.
 *
 * Gathered events are deleted rather than marked: the delivery's body holds each one
 * verbatim, so a marked row would be a second copy kept only to be purged later, and the
 * table holds only what waits (seconds' worth), so its index stays small at any volume.
 *
 * The one race: an appender whose enqueue found the job still there, but whose transaction
 * commits after the gather read the stream, would leave its events with no job once the
 * gather completes. SQLite runs one write transaction at a time, so a gather sees all of an
 * appender's events or runs wholly before it (and the appender then queues a new job).
 * PostgreSQL runs them side by side, so the stream has an advisory lock: each appender takes
 * it shared when it queues the job and holds it until it commits (appenders never wait for one
 * another). Only the queueing needs it: an appender may write its events earlier in its
 * transaction (a page's record writes them first, for their order, and queues after its
 * statement of outcomes, so a gather does not wait for that). The gather reads and
 * removes what has committed without it, then takes it exclusively before it completes: that
 * waits for every appender that may have counted on the job, and if one appended meanwhile
 * the job stays, to run a window later. An appender that comes after waits for the gather to
 * commit, by which time its job is gone and the appender's enqueue queues the next. Taken
 * before the read, the lock held every appender of the stream (each passcode's record, each
 * group of receipts) for the whole run, 31 ms on average in bench:kannel: 5 ms of waiting an
 * append. A gather holding the lock waits for no appender, so no lock cycle can form through
 * it; an appender holding one stream's lock that queues behind a waiting gather of another
 * stream is a "soft" wait, which PostgreSQL's deadlock check resolves by reordering the
 * queue rather than by an error.
 */

/** The queue kind whose job gathers one stream's events into posts; its payload is an EventStream. */
export const GATHER_KIND = 'webhook.gather';

/** The events that may share a post: one account's, for one URL, of one type. */
export interface EventStream {
  accountId: string;
  url: string;
  /** e.g. `sms.status`, `email.events`. */
  type: string;
}

/** Events in one post at most. */
export const EVENTS_PER_POST = 500;

/**
 * How long a stream's first event waits for others to join its post. Less than the second
 * the contract allows: what is left covers the gather, the delivery job's claim and the
 * connection, so the post is made within 1 s of the first event (on a worker that is not
 * behind; a stream whose receiver fails is on the retry schedule instead).
 */
export const GATHER_WINDOW_MS = 900;

/**
 * Posts one gather run writes at most (5,000 events), so a stream that fell behind is
 * caught up in several short transactions rather than one that holds its appenders long.
 */
const POSTS_PER_RUN = 10;

/**
 * The stream's gather-job key, which is also its lock's name. Hashed: a URL may be long,
 * and the jobs' unique index wants short keys; JSON keeps the parts apart.
 */
function streamKey(stream: EventStream): string {
  const digest = createHash('sha256')
    .update(JSON.stringify([stream.accountId, stream.type, stream.url]))
    .digest('base64url');
  return `${GATHER_KIND}:${digest}`;
}

/** One stream's share of an append: its events in order. */
type StreamAppend = EventStream & { events: readonly object[] };

/**
 * Writes the events to their stream, in the caller's transaction, one row whatever the count:
 * they are posted if and only if the caller's work commits, at most EVENTS_PER_POST a post, in
 * the order written. Each event is a JSON object, one element of the post's `data`. Posted only
 * once queueGather has run for the stream in the same transaction.
 */
async function writeEvents(db: Kysely<Schema>, now: number, append: StreamAppend): Promise<void> {
  await db
    .insertInto('webhook_events')
    .values({
      account_id: append.accountId,
      type: append.type,
      url: append.url,
      events: JSON.stringify(append.events),
      event_count: append.events.length,
      created_at: now,
    })
    .execute();
}

/**
 * Queues the stream's gather job, the first of its events posted within a second, holding the
 * stream's lock shared until the caller's transaction ends (two statements on PostgreSQL,
 * one on SQLite, whatever the events). Where the events were written earlier in the
 * transaction does not matter: the gather decides by what has committed once it holds the lock.
 */
async function queueGather(db: Kysely<Schema>, now: number, stream: EventStream): Promise<void> {
  const key = streamKey(stream);
  await lockStreamShared(db, key);
  await enqueue(db, {
    kind: GATHER_KIND,
    payload: { accountId: stream.accountId, url: stream.url, type: stream.type } satisfies EventStream,
    accountId: stream.accountId,
    now,
    runAt: now + GATHER_WINDOW_MS,
    idempotencyKey: key,
    priority: PRIORITY.webhook,
  });
}

/**
 * Events written now, ahead of the caller's other work, for their order; `queue` queues
 * their streams' gathers later in the same transaction, once its long statements are done:
 * the stream's lock is held from there to the commit, and a gather waits for every holder.
 * Call it before the transaction touches a job a worker holds (the caller's own): queueing a
 * gather waits for a heartbeat's renewal of the gather's lease under way, and the heartbeat
 * renews the worker's other jobs in the same statement, so it may wait for that row in turn.
 */
export interface EventsAhead {
  queue(): Promise<void>;
}

async function writeAhead(db: Kysely<Schema>, clock: Clock, appends: StreamAppend[]): Promise<EventsAhead> {
  const now = clock.now();
  const written = appends.filter((append) => append.events.length > 0);
  for (const append of written) await writeEvents(db, now, append);
  return {
    async queue() {
      for (const stream of written) await queueGather(db, now, stream);
    },
  };
}

/**
 * Where events of one account and type go: the per-request URL's stream (`url`; null: none)
 * and the stream of each of the account's webhook endpoints subscribed to the type
 * (endpoints.ts), but for an endpoint whose URL is the per-request one once normalised: that
 * receiver gets each event once, in the per-request stream. Every stream gets the events in
 * the order given. The endpoints are read in the transaction, one indexed statement.
 */
async function accountAppends(
  db: Kysely<Schema>,
  append: Omit<EventStream, 'url'> & { url: string | null; events: readonly object[] },
): Promise<StreamAppend[]> {
  if (append.events.length === 0) return [];
  const { accountId, url, type, events } = append;
  const appends: StreamAppend[] = url ? [{ accountId, url, type, events }] : [];
  const own = url ? normaliseUrl(url) : null;
  for (const endpoint of await subscribedUrls(db, accountId, type)) {
    if (endpoint !== own) appends.push({ accountId, url: endpoint, type, events });
  }
  return appends;
}

/**
 * Where events of one type go, each of its account and per-request URL (null: none): one
 * append per per-request stream, and for each account's endpoint subscribed to the type one
 * append of the account's events whose URL is not the endpoint's (accountAppends), events in order.
 */
async function typeAppends(
  db: Kysely<Schema>,
  type: string,
  entries: ReadonlyArray<{ accountId: string; url: string | null; event: object }>,
): Promise<StreamAppend[]> {
  const accounts = new Map<string, Array<{ url: string | null; event: object }>>();
  for (const { accountId, url, event } of entries) {
    if (!accounts.has(accountId)) accounts.set(accountId, []);
    accounts.get(accountId)!.push({ url: url || null, event });
  }
  const appends: StreamAppend[] = [];
  for (const [accountId, own] of accounts) {
    const streams = new Map<string, object[]>();
    for (const { url, event } of own) {
      if (url === null) continue;
      if (!streams.has(url)) streams.set(url, []);
      streams.get(url)!.push(event);
    }
    for (const [url, events] of streams) appends.push({ accountId, url, type, events });
    const endpoints = await subscribedUrls(db, accountId, type);
    if (endpoints.length === 0) continue;
    const normalised = new Map([...streams.keys()].map((url) => [url, normaliseUrl(url)]));
    for (const endpoint of endpoints) {
      const events = own.filter(({ url }) => url === null || normalised.get(url) !== endpoint).map((e) => e.event);
      appends.push({ accountId, url: endpoint, type, events });
    }
  }
  return appends;
}

/** Events of one account and type written ahead (accountAppends says where), queued later (EventsAhead). */
export async function appendWebhookEventsAhead(
  db: Kysely<Schema>,
  clock: Clock,
  append: Omit<EventStream, 'url'> & { url: string | null; events: readonly object[] },
): Promise<EventsAhead> {
  return writeAhead(db, clock, await accountAppends(db, append));
}

/** Appends events of one account and type in the caller's transaction: written and queued at once. */
export async function appendWebhookEvents(...args: Parameters<typeof appendWebhookEventsAhead>): Promise<void> {
  await (await appendWebhookEventsAhead(...args)).queue();
}

/** Events of one type, each of its account and URL, written ahead (typeAppends says where), queued later. */
export async function appendToStreamsAhead(
  db: Kysely<Schema>,
  clock: Clock,
  type: string,
  entries: ReadonlyArray<{ accountId: string; url: string | null; event: object }>,
): Promise<EventsAhead> {
  return writeAhead(db, clock, await typeAppends(db, type, entries));
}

/** Appends events of one type, each of its account and URL, in the caller's transaction: written and queued at once. */
export async function appendToStreams(...args: Parameters<typeof appendToStreamsAhead>): Promise<void> {
  await (await appendToStreamsAhead(...args)).queue();
}

/** The rows of one stream's waiting events. */
const inStream = (stream: EventStream) => (eb: ExpressionBuilder<Schema, 'webhook_events'>) =>
  eb.and({ account_id: stream.accountId, type: stream.type, url: stream.url });

/**
 * Removes up to `limit` of the stream's oldest events and answers them, in append order,
 * each as JSON: the appends taken whole are deleted, and the one the limit cuts through
 * keeps what is left of it. The appends are picked by their counts, then removed by id, so one
 * that commits meanwhile (PostgreSQL) is left whole for the next run. Each is read as it is
 * removed (DELETE … RETURNING), and the one cut read under its lock: an erasure that rewrites
 * one meanwhile (privacy/erasures.ts) is either seen or waits, never written over with a read
 * from before it.
 */
async function takeEvents(db: Kysely<Schema>, stream: EventStream, limit: number): Promise<string[]> {
  // Each append holds at least one event, so no more than `limit` of them can be needed.
  const counts = await db
    .selectFrom('webhook_events')
    .where(inStream(stream))
    .select(['id', 'event_count'])
    .orderBy('id')
    .limit(limit)
    .execute();
  const picked: number[] = [];
  let counted = 0;
  for (const row of counts) {
    if (counted >= limit) break;
    counted += row.event_count;
    picked.push(row.id);
  }
  if (picked.length === 0) return [];
  const ids = (list: number[]) => inJson(dialectOf(db), list, 'bigint');
  // Only the last append picked can hold more than the limit leaves room for.
  const cut = counted > limit ? picked.at(-1) : undefined;
  const whole = cut === undefined ? picked : picked.slice(0, -1);
  const rows =
    whole.length === 0
      ? []
      : await db.deleteFrom('webhook_events').where('id', 'in', ids(whole)).returning(['id', 'events']).execute();
  rows.sort((a, b) => Number(a.id) - Number(b.id));
  if (cut !== undefined) {
    const read = db.selectFrom('webhook_events').select(['id', 'events']).where('id', '=', cut);
    rows.push(...(await lockTaken(db, read).execute()));
  }
  // Parsed and written again, each event comes out as the bytes JSON.stringify gave it at append.
  const events = rows.flatMap((row) => (JSON.parse(row.events) as unknown[]).map((event) => JSON.stringify(event)));
  const rest = events.splice(limit);
  if (rest.length > 0) {
    await db
      .updateTable('webhook_events')
      .set({ events: `[${rest.join(',')}]`, event_count: rest.length })
      .where('id', '=', cut!)
      .execute();
  }
  return events;
}

/**
 * One run of a stream's gather job, one transaction: the stream's waiting events become
 * deliveries; then, under the stream's lock (which waits for every appender that may have
 * counted on this job), the job completes if no event came meanwhile. Otherwise it runs again:
 * at once when this run took as many as it may ('more'), a window later when an append
 * committed while it ran ('later'). The lock is taken after the events are read, not before,
 * so appenders wait only for the end of the run, not all of it. A run whose lease lapsed
 * meanwhile rolls back, leaving its events to the worker that holds the job now.
 */
async function gather(
  database: Database,
  now: number,
  stream: EventStream,
  lease: Lease,
  deliveryUrl: string,
): Promise<'completed' | 'more' | 'later'> {
  return database.db.transaction().execute(async (trx) => {
    const limit = POSTS_PER_RUN * EVENTS_PER_POST;
    const events = await takeEvents(trx, stream, limit);
    const deliveries: NewDelivery[] = [];
    for (let start = 0; start < events.length; start += EVENTS_PER_POST) {
      const data = `[${events.slice(start, start + EVENTS_PER_POST).join(',')}]`;
      deliveries.push({ ...stream, url: deliveryUrl, body: webhookBody(stream.type, now, data) });
    }
    await createDeliveries(trx, now, deliveries);
    if (events.length === limit) {
      await keepJob(trx, lease);
      return 'more';
    }
    await lockStream(trx, streamKey(stream));
    const appended = await trx.selectFrom('webhook_events').where(inStream(stream)).select('id').executeTakeFirst();
    if (appended) {
      await keepJob(trx, lease);
      return 'later';
    }
    await completeJob(trx, lease);
    return 'completed';
  });
}

/**
 * The `webhook.gather` job. A run that left events behind runs again at once. No onDead:
 * a gather job that dies keeps its stream's key, so later appends queue no other and the
 * events wait, none lost, until an operator revives it (POST /admin/jobs/{id}/retry), when
 * it gathers them all.
 */
export function webhookGatherHandler(deps: { database: Database; clock: Clock; encryptionKey: Keyring }): JobHandler {
  return {
    async handle(job, run) {
      const { accountId, url, type } = job.payload as EventStream;
      const now = deps.clock.now();
      // A stream appended before credentials in URLs were sealed (0044) keeps its URL as given.
      const deliveryUrl = sealedIfClear(await urlKey(deps.database.db, deps.encryptionKey), url) ?? url;
      const outcome = await gather(deps.database, now, { accountId, url, type }, run.lease, deliveryUrl);
      if (outcome === 'more') throw new SnoozeJob(now, 'the stream had more events than one run gathers');
      if (outcome === 'later') throw new SnoozeJob(now + GATHER_WINDOW_MS, 'events were appended while it ran');
      return 'completed';
    },
  };
}
