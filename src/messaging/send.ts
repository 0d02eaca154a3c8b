import { type Expression, type ExpressionBuilder, type Kysely, type Selectable } from 'kysely';
import type { Clock } from '../clock.ts';
import type { Database, DialectName } from '../db/database.ts';
import { procedure } from '../db/procedure.ts';
import type { Schema } from '../db/schema.ts';
import { defaultListId } from '../crm/setup.ts';
import { notFound } from '../errors.ts';
import { cursorCodec } from '../http/cursor.ts';
import type { NewJob } from '../queue/queue.ts';
import type { Lease } from '../queue/queries.ts';
import { completeJob, SnoozeJob, type JobRun } from '../queue/worker.ts';
import { appendWebhookEvents } from '../webhooks/events.ts';
import { queries } from './queries.ts';
import { pauseForTest } from './test-pause.ts';
import { UsageTally } from './rollup.ts';
import {
  expandRecipients,
  refusedInRange,
  requestRecipientsInsert,
  type Channel,
  type StoredRecipient,
} from './recipients.ts';

/**
 * What a send's pipeline is, whatever its channel (MESSAGING.md): accepted with its request
 * recipients and its job in one transaction; expanded a range at a time with its checkpoint;
 * then sent a page of recipients at a time, each page's results recorded with the send's
 * cursor, until none is left; cancelled while it waits; read back a page at a time. Each
 * channel renders, hands over and records a page its own way (src/sms/send.ts, src/email/send.ts).
 */

type Db = Kysely<Schema>;

/** Recipients handed over and recorded together: one commit a page. */
export const PAGE = 500;

/** A send with messages refused for now tries them again after this long. */
export const RETRY_LATER_MS = 5_000;

/** How a send's last page ended: done, or messages refused for now remain, to try again at `retryAt` (epoch ms). */
export type Finish = 'completed' | { retryAt: number };

/** A send as it is accepted. `content`: the channel's request as its worker reads it, in JSON. */
export interface NewSend {
  id: string;
  accountId: string;
  channel: Channel;
  content: string;
  listIds: string[];
  webhookUrl: string | null;
  /** Epoch ms; null = now. */
  scheduledAt: number | null;
  /** Stored with its recipients settled already (an immediate single SMS). */
  expanded: boolean;
  now: number;
}

/**
 * The writes of an accept, in the caller's transaction: the send, its request recipients and
 * its job. On PostgreSQL they are one statement, so an accept costs one round trip.
 */
export async function writeSend(
  db: Db,
  dialect: DialectName,
  send: NewSend,
  recipients: StoredRecipient[],
  job: NewJob,
): Promise<void> {
  const row = db.insertInto('sends').values({
    id: send.id,
    account_id: send.accountId,
    channel: send.channel,
    status: send.scheduledAt === null ? 'Queued' : 'Scheduled',
    content: send.content,
    list_ids: JSON.stringify(send.listIds),
    webhook_url: send.webhookUrl,
    scheduled_at: send.scheduledAt,
    expanded: send.expanded,
    created_at: send.now,
    started_at: null,
    completed_at: null,
  });
  const ownRecipients =
    recipients.length > 0 ? requestRecipientsInsert(dialect, send.id, send.now, recipients) : undefined;
  await queries[dialect].writeAccept(db, ownRecipients ? [row, ownRecipients] : [row], job);
}

/**
 * `DELETE /sms/{queueId}`, `DELETE /email/batch/{batchId}`: cancels a send that has not started
 * (its recipients Cancelled, its job gone, found by `jobKey`); answers what the route says:
 * cancelled, not the account's, or already sending. A send has started once a worker claimed
 * its job: an immediate single SMS is never marked Sending (it goes from Queued to Completed
 * in one write), so its waiting job is what tells.
 */
export const cancelSend = procedure(
  import.meta.url,
  'cancelSend',
  async (
    { db, dialect },
    args: { accountId: string; channel: Channel; sendId: string; jobKey: string; now: number },
  ): Promise<'cancelled' | 'not found' | 'started'> =>
    db.transaction().execute(async (trx) => {
      const send = await trx
        .selectFrom('sends')
        .select('status')
        .where('id', '=', args.sendId)
        .where('account_id', '=', args.accountId)
        .where('channel', '=', args.channel)
        .executeTakeFirst();
      if (!send) return 'not found';
      if (send.status !== 'Queued' && send.status !== 'Scheduled') return 'started';
      const waiting = await trx
        .deleteFrom('jobs')
        .where('idempotency_key', '=', args.jobKey)
        .where('state', '=', 'ready')
        .executeTakeFirst();
      if (Number(waiting.numDeletedRows) === 0) return 'started';
      await trx
        .updateTable('sends')
        .set({ status: 'Cancelled', completed_at: args.now })
        .where('id', '=', args.sendId)
        .execute();
      const cancelled = await trx
        .updateTable('send_recipients')
        .set({ status: 'Cancelled', updated_at: args.now })
        .where('send_id', '=', args.sendId)
        .where('status', '=', 'Queued')
        .executeTakeFirst();
      const tally = new UsageTally(args.now);
      tally.add(args.accountId, args.channel, 'Cancelled', { messages: Number(cancelled.numUpdatedRows) });
      await tally.write(trx, dialect);
      return 'cancelled';
    }),
);

export interface PageRow {
  id: number;
  address: string;
  tags: string | null;
  properties: string | null;
  /** Times the message was refused for now (email's Deferred). */
  attempts: number;
  /** Email: when it was first refused for now (epoch ms; a string from PostgreSQL), null if never. */
  deferred_at: number | null;
  /** Email: the id its message was first tried with (a retry's), null if never tried. */
  message_id: string | null;
}

export interface StartedSend {
  accountId: string;
  /** The channel's content, in JSON as accepted. */
  content: string;
  webhookUrl: string | null;
  cursor: number;
  /** The first page to send, read in the same round trip: a one-time passcode's only one. */
  firstPage: PageRow[];
}

/** One range of an expansion, just written: what a channel that posts refusals reads (recipients.ts, refusedInRange). */
export interface ExpandedRange {
  accountId: string;
  webhookUrl: string | null;
  after: string | null;
  through: string | null;
}

/**
 * A send's start, in the caller's transaction: until its recipients are all expanded, one
 * range of them (expanded from its lists, consent settled) with the send marked Sending and
 * its checkpoint, answering 'expanding'; `onRange` runs in the same transaction after each.
 * Then its first page to send (`load`, the channel's page after the cursor, read in the
 * transaction). A send cancelled or done answers null.
 */
export async function startSend(
  trx: Db,
  dialect: DialectName,
  args: { sendId: string; now: number; load: (accountId: string, cursor: number) => Promise<PageRow[]> },
  onRange?: (range: ExpandedRange) => Promise<void>,
): Promise<StartedSend | 'expanding' | null> {
  const send = await trx.selectFrom('sends').selectAll().where('id', '=', args.sendId).executeTakeFirst();
  if (!send || send.status === 'Cancelled' || send.status === 'Completed') return null;
  if (!send.expanded) {
    const channel = send.channel as Channel;
    const tally = new UsageTally(args.now);
    const through = await expandRecipients(trx, dialect, {
      tally,
      channel,
      sendId: send.id,
      accountId: send.account_id,
      listIds: JSON.parse(send.list_ids) as string[],
      allContactsListId: await defaultListId(trx, send.account_id),
      after: send.expanded_through,
      now: args.now,
    });
    await onRange?.({
      accountId: send.account_id,
      webhookUrl: send.webhook_url,
      after: send.expanded_through,
      through,
    });
    await pauseForTest(`${channel}.expand`);
    await trx
      .updateTable('sends')
      .set({
        expanded: through === null,
        expanded_through: through,
        status: 'Sending',
        started_at: send.started_at ?? args.now,
      })
      .where('id', '=', send.id)
      .execute();
    await tally.write(trx, dialect);
    if (through !== null) return 'expanding';
  }
  const cursor = Number(send.cursor);
  return {
    accountId: send.account_id,
    content: send.content,
    webhookUrl: send.webhook_url,
    cursor,
    firstPage: await args.load(send.account_id, cursor),
  };
}

/**
 * A startSend `onRange` that posts the recipients a range refused (NotSent, Dropped) to the
 * send's webhook, in the caller's transaction, each as the channel's `event` of it.
 */
export function postRefused(
  trx: Db,
  args: {
    channel: Channel;
    sendId: string;
    now: number;
    type: string;
    event: (refused: { address: string; reason: string | null }) => object;
  },
): (range: ExpandedRange) => Promise<void> {
  return async (range) => {
    if (!range.webhookUrl) return;
    const refused = await refusedInRange(trx, args.channel, args.sendId, range.after, range.through);
    const stream = { accountId: range.accountId, url: range.webhookUrl, type: args.type };
    await appendWebhookEvents(trx, { now: () => args.now }, { ...stream, events: refused.map(args.event) });
  };
}

/**
 * A page row's contact properties, looked up by the contact's key one row at a time: as a
 * join, PostgreSQL planned it by the table's statistics, and right after a list was imported
 * (none yet for its contacts) it read every contact of the account for each recipient.
 */
export function contactProperties(
  eb: ExpressionBuilder<Schema & { r: Schema['send_recipients'] }, 'r'>,
  accountId: Expression<string>,
) {
  return eb
    .selectFrom('contacts as c')
    .select('c.properties')
    .where('c.account_id', '=', accountId)
    .whereRef('c.id', '=', 'r.contact_id')
    .as('properties');
}

/** A send's recipients as a page holds them (PageRow), for the caller to narrow, order and limit. */
export function pageRows(db: Db, accountId: string, sendId: string) {
  return db
    .selectFrom('send_recipients as r')
    .select(['r.id', 'r.address', 'r.tags', 'r.attempts', 'r.deferred_at', 'r.message_id'])
    .select((eb) => contactProperties(eb, eb.val(accountId)))
    .where('r.send_id', '=', sendId);
}

/** The next page of a send's recipients still to send (status in `pending`), after the cursor, in id order. */
export async function loadPage(
  db: Db,
  accountId: string,
  sendId: string,
  after: number,
  pending: readonly string[],
): Promise<PageRow[]> {
  return pageRows(db, accountId, sendId)
    .where('r.status', 'in', pending)
    .where('r.id', '>', after)
    .orderBy('r.id')
    .limit(PAGE)
    .execute() as Promise<PageRow[]>;
}

/** The account's property names by id, lower-cased: what `[name]` looks up in a contact. */
export async function propertyNames(db: Db, accountId: string): Promise<Map<string, string>> {
  const rows = await db
    .selectFrom('contact_properties')
    .select(['id', 'name_key'])
    .where('account_id', '=', accountId)
    .execute();
  return new Map(rows.map((row) => [row.id, row.name_key]));
}

/** A page row's contact properties by lower-cased name (what tags.ts looks a tag up in), or null for none. */
export function rowProperties(row: PageRow, names: Map<string, string>): Map<string, string> | null {
  if (!row.properties) return null;
  const properties = new Map<string, string>();
  for (const [id, value] of Object.entries(JSON.parse(row.properties) as Record<string, string>)) {
    const name = names.get(id);
    if (name !== undefined) properties.set(name, value);
  }
  return properties;
}

/**
 * The send done, in the caller's transaction: Completed and its job with it, unless
 * recipients refused for now remain (status in `pending`), which are tried again from the
 * start of the send after RETRY_LATER_MS.
 */
export async function finishSend(
  trx: Db,
  sendId: string,
  now: number,
  lease: Lease,
  pending: readonly string[],
): Promise<Finish> {
  const waiting = await trx
    .selectFrom('send_recipients')
    .select('id')
    .where('send_id', '=', sendId)
    .where('status', 'in', pending)
    .executeTakeFirst();
  if (waiting) {
    await trx.updateTable('sends').set({ cursor: 0 }).where('id', '=', sendId).execute();
    return { retryAt: now + RETRY_LATER_MS };
  }
  return completeSend(trx, sendId, now, lease);
}

/** The send Completed and its job with it, in the caller's transaction. */
export async function completeSend(trx: Db, sendId: string, now: number, lease: Lease): Promise<'completed'> {
  await trx.updateTable('sends').set({ status: 'Completed', completed_at: now }).where('id', '=', sendId).execute();
  await completeJob(trx, lease);
  return 'completed';
}

/** The send done when its last page was recorded earlier (it resumed with nothing left to send). */
export const finishResumedSend = procedure(
  import.meta.url,
  'finishResumedSend',
  async ({ db }, args: { sendId: string; now: number; lease: Lease; pending: string[] }): Promise<Finish> =>
    db.transaction().execute((trx) => finishSend(trx, args.sendId, args.now, args.lease, args.pending)),
);

/** A recipient a send's job gave up on, as endUnsent hands it to the channel's webhook event. */
export interface UnsentRow {
  id: number;
  address: string;
  message_id: string | null;
  parts: number | null;
}

/**
 * A send's job died (its last attempt failed, or it kept killing its worker), in the caller's
 * transaction: its recipients still in `pending` take the channel's word for it (SMS Failed,
 * email Dropped) with the reason, in their history, posted like any other outcome and counted
 * for the usage rollup, and the send is Completed.
 */
export async function endUnsent(
  trx: Db,
  dialect: DialectName,
  clock: Clock,
  args: {
    sendId: string;
    error: string;
    channel: Channel;
    status: 'Failed' | 'Dropped';
    pending: readonly string[];
    /** Where the channel keeps the reason, and what else it clears. */
    columns: (reason: string) => Record<string, string | null>;
    webhookType: string;
    event: (row: UnsentRow, reason: string, now: number) => object;
  },
): Promise<void> {
  const now = clock.now();
  const send = await trx
    .selectFrom('sends')
    .select(['account_id', 'webhook_url'])
    .where('id', '=', args.sendId)
    .executeTakeFirst();
  if (!send) return;
  const reason = `not sent: ${args.error}`;
  const ended = (await trx
    .updateTable('send_recipients')
    .set({ ...args.columns(reason), status: args.status, updated_at: now })
    .where('send_id', '=', args.sendId)
    .where('status', 'in', args.pending)
    .returning(['id', 'address', 'message_id', 'parts'])
    .execute()) as UnsentRow[];
  const tally = new UsageTally(now);
  tally.add(send.account_id, args.channel, args.status, { messages: ended.length });
  if (ended.length > 0) {
    await trx
      .insertInto('recipient_history')
      .values(ended.map((r) => ({ recipient_id: r.id, status: args.status, at: now })))
      .execute();
    if (send.webhook_url) {
      await appendWebhookEvents(trx, clock, {
        accountId: send.account_id,
        url: send.webhook_url,
        type: args.webhookType,
        events: ended.map((r) => args.event(r, reason, now)),
      });
    }
  }
  await trx
    .updateTable('sends')
    .set({ status: 'Completed', completed_at: now })
    .where('id', '=', args.sendId)
    .execute();
  await tally.write(trx, dialect);
}

/**
 * Starts a send, a range of its expansion a call, until it is expanded: its start, or null
 * when there is nothing to send.
 *
 * An expansion of more than one range is followed by the database's step after one: on
 * PostgreSQL an ANALYZE of send_recipients (messaging/queries.ts says why).
 */
export async function expandedSend<T>(
  deps: { database: Database; clock: Clock },
  run: JobRun,
  start: () => Promise<T | 'expanding' | null>,
): Promise<T | null> {
  let started: T | 'expanding' | null;
  let ranges = 0;
  while ((started = await start()) === 'expanding') {
    ranges++;
    if (run.signal.aborted) throw new SnoozeJob(deps.clock.now(), 'the worker is stopping');
  }
  if (ranges > 0) await queries[deps.database.dialect].expanded(deps.database.db);
  return started;
}

/**
 * A channel's recipients still to send, as its send job reads them: SMS's are those Queued
 * (pendingByStatus); email's also those refused for now whose time has come (email/record.ts).
 */
export interface Pending {
  /** The next page after the cursor. */
  load(cursor: number): Promise<PageRow[]>;
  /** Finishes the send when its last page was recorded earlier (it resumed, or woke, with none to send). */
  finish(lease: Lease): Promise<Finish>;
}

/** The send's recipients in `statuses` after the cursor, in id order; once none is left, finishSend. */
export function pendingByStatus(
  deps: { database: Database; clock: Clock },
  send: { sendId: string; accountId: string },
  statuses: readonly string[],
): Pending {
  const { database, clock } = deps;
  return {
    load: (cursor) => loadPage(database.db, send.accountId, send.sendId, cursor, statuses),
    finish: (lease) =>
      database.call(finishResumedSend, { sendId: send.sendId, now: clock.now(), lease, pending: [...statuses] }),
  };
}

/** What a channel's `page` is given beside its rows. */
export interface PageContext {
  /** The highest recipient id handed so far: the cursor its record writes. */
  cursor: number;
  /** The job's lease when this is the send's last page (a short one), for its record to finish the send; else null. */
  last: Lease | null;
  /** The next page, being read while this one is handed over; null when it is read after this one's record (sendInPages). */
  next: Promise<PageRow[]> | null;
}

/**
 * A send's pages from its cursor (`pending` reads them), until none is left: `page` hands one
 * over and records its results with the cursor given (the highest recipient id handed so
 * far), finishing the send in the same transaction when it is the last (`last`, the job's
 * lease: a short page). When messages refused for now remain, the job is snoozed until the
 * time the finish names.
 *
 * The next page is read while a page is handed over, when its record cannot change what that
 * read sees: a full page of first tries (none refused before) records only its own rows, all
 * behind the cursor, and those it defers are not due before their wait. A page holding
 * retries is read after its record: until then they are still due, and email's read of the
 * retries due (email/record.ts, loadEmailPage) would find them again. Nothing of the next
 * page is handed over before this one is recorded: a crash still resends one page at most.
 */
export async function sendInPages(
  deps: { clock: Clock },
  run: JobRun,
  send: { cursor: number; firstPage: PageRow[] },
  pending: Pending,
  page: (rows: PageRow[], context: PageContext) => Promise<'more' | Finish>,
): Promise<'completed'> {
  const { clock } = deps;
  let cursor = send.cursor;
  let finished: Finish;
  for (let rows = send.firstPage; ; ) {
    if (run.signal.aborted) throw new SnoozeJob(clock.now(), 'the worker is stopping');
    if (rows.length === 0) {
      finished = await pending.finish(run.lease);
      break;
    }
    cursor = Math.max(cursor, ...rows.map((row) => Number(row.id)));
    const last = rows.length < PAGE ? run.lease : null;
    const next = last === null && rows.every((row) => row.attempts === 0) ? pending.load(cursor) : null;
    // A job that stops after this page never reads what was read ahead; its failure is the next turn's to throw.
    next?.catch(() => undefined);
    const recorded = await page(rows, { cursor, last, next });
    if (recorded !== 'more') {
      finished = recorded;
      break;
    }
    rows = await (next ?? pending.load(cursor));
  }
  if (finished !== 'completed') throw new SnoozeJob(finished.retryAt, 'messages refused for now are tried again');
  return 'completed';
}

const iso = (ms: number) => new Date(ms).toISOString();
const recipientCursor = cursorCodec(['integer']);

/**
 * What a send's read shows of what it said (ARCHITECTURE.md, "Reads gain what was sent"):
 * `sealed` for an isBodyEncrypted send, whose text no read opens; `purged` once retention cut
 * it (retention.ts). Its content's fields are null unless `available`.
 */
export type ContentState = 'available' | 'sealed' | 'purged';

export const contentState = (send: { purged_at: number | null }, sealed: boolean): ContentState =>
  send.purged_at !== null ? 'purged' : sealed ? 'sealed' : 'available';

/** A page of a send's read: `status`, one of its channel's words (RecipientStatus), shows only the recipients at it. */
export interface SendReadPage {
  limit: number;
  cursor?: string;
  status?: string;
}

/**
 * The common part of a send's read (ARCHITECTURE.md's reads): the account's send of the
 * channel (404 otherwise), its totals by status word with the parts counted, and a page of
 * its recipients in id order, each with its history. Until its time comes, a scheduled
 * send's recipients read Scheduled rather than Queued.
 */
export async function readSendPage(
  db: Db,
  accountId: string,
  channel: Channel,
  sendId: string,
  page: SendReadPage,
  what: string,
) {
  const send = await db
    .selectFrom('sends')
    .selectAll()
    .where('id', '=', sendId)
    .where('account_id', '=', accountId)
    .where('channel', '=', channel)
    .executeTakeFirst();
  if (!send) throw notFound(what);
  const word = (status: string) => recipientWord(send, status);
  const counts = (await statusCounts(db, [send.id])).get(send.id) ?? [];

  const after = page.cursor === undefined ? 0 : recipientCursor.decode(page.cursor)[0];
  let select = db.selectFrom('send_recipients').selectAll().where('send_id', '=', sendId).where('id', '>', after);
  // No index of its own: the page walks the send's recipients in id order until it has
  // `limit` of the word, so a rare word walks the whole send, as the totals above already do.
  // 100,000 recipients with one Failed: 212 ms against 199 ms unfiltered on SQLite, 109
  // against 83 ms on PostgreSQL; an index by status would cost every status change a write.
  const status = page.status === undefined ? undefined : storedStatus(send, page.status);
  if (status !== undefined && status !== null) select = select.where('status', '=', status);
  const rows =
    status === null
      ? []
      : await select
          .orderBy('id')
          .limit(page.limit + 1)
          .execute();
  const { rows: shown, nextCursor } = recipientCursor.page(rows, page.limit, (last) => [Number(last.id)]);
  const ids = shown.map((row) => Number(row.id));
  const history =
    ids.length === 0
      ? []
      : await db.selectFrom('recipient_history').selectAll().where('recipient_id', 'in', ids).orderBy('at').execute();
  return {
    send,
    summary: sendSummary(send, counts),
    counts,
    recipients: shown.map((row) => ({ ...row, status: word(row.status) })),
    historyOf: readHistory(send, channel, shown, history),
    ids,
    nextCursor,
  };
}

type HistoryRow = Selectable<Schema['recipient_history']>;

/**
 * Each recipient's history as reads show it: what recipient_history holds, between the words
 * that the send's own times tell, which no row holds and so never post (ARCHITECTURE.md):
 * Scheduled at a scheduled send's creation; Queued, SMS's first word (email's history holds
 * SPEC §3's events only), when its message was queued: at the send's creation, or when a
 * scheduled one started; Cancelled when the send of a cancelled recipient was.
 */
function readHistory(
  send: Selectable<Schema['sends']>,
  channel: Channel,
  rows: Array<{ id: number; status: string }>,
  recorded: HistoryRow[],
): Map<number, HistoryRow[]> {
  const entry = (recipientId: number, status: string, at: number | null): HistoryRow[] =>
    at === null ? [] : [{ recipient_id: recipientId, status, at: Number(at), url: null, reply: null, machine: null }];
  const scheduled = send.scheduled_at !== null;
  const queuedAt = channel === 'sms' ? (scheduled ? send.started_at : send.created_at) : null;
  const recordedOf = groupBy(recorded, (h) => Number(h.recipient_id));
  return new Map(
    rows.map((row) => {
      const id = Number(row.id);
      return [
        id,
        [
          ...entry(id, 'Scheduled', scheduled ? send.created_at : null),
          ...entry(id, 'Queued', queuedAt),
          ...(recordedOf.get(id) ?? []),
          ...entry(id, 'Cancelled', row.status === 'Cancelled' ? send.completed_at : null),
        ],
      ];
    }),
  );
}

/** A recipient's status word as reads show it: until its time comes, a scheduled send's Queued recipients read Scheduled. */
export const recipientWord = (send: { status: string }, status: string) =>
  status === 'Queued' && send.status === 'Scheduled' ? 'Scheduled' : status;

/** The stored status of the recipients that read `word` (recipientWord's inverse), or null when none can. */
function storedStatus(send: { status: string }, word: string): string | null {
  if (word === 'Scheduled') return send.status === 'Scheduled' ? 'Queued' : null;
  return word === 'Queued' && send.status === 'Scheduled' ? null : word;
}

/** How many recipients of a send are at each status, with their parts. */
export interface StatusCount {
  status: string;
  n: number;
  parts: number | null;
}

/**
 * The sends' recipients counted by status, in one grouped read by the (send_id, id) index:
 * it visits each recipient of the sends once (about 1 µs each here; docs/api.md, "Sends, usage
 * and statistics", gives what a page of sends costs).
 */
async function statusCounts(db: Db, sendIds: string[]): Promise<Map<string, StatusCount[]>> {
  if (sendIds.length === 0) return new Map();
  const rows = await db
    .selectFrom('send_recipients')
    .select([
      'send_id',
      'status',
      (eb) => eb.fn.countAll<number>().as('n'),
      (eb) => eb.fn.sum<number>('parts').as('parts'),
    ])
    .where('send_id', 'in', sendIds)
    .groupBy(['send_id', 'status'])
    .execute();
  const counts = new Map<string, StatusCount[]>();
  for (const { send_id: sendId, ...count } of rows) counts.set(sendId, [...(counts.get(sendId) ?? []), count]);
  return counts;
}

/** What a send's read and the listing of sends show of it: its times, status and totals by status word. */
function sendSummary(send: { status: string; created_at: number; scheduled_at: number | null }, counts: StatusCount[]) {
  const totals: Record<string, number> = {};
  for (const row of counts) {
    const word = recipientWord(send, row.status);
    totals[word] = (totals[word] ?? 0) + Number(row.n);
  }
  return {
    createdAt: iso(Number(send.created_at)),
    scheduledAt: send.scheduled_at === null ? null : iso(Number(send.scheduled_at)),
    status: send.status,
    totals,
  };
}

const listingCursor = cursorCodec(['integer', 'uuid']);

/**
 * `GET /sms`, `GET /email/batch`: the account's sends of the channel, newest first, a page at
 * a time (by the sends_listing index), each with its summary as its own read shows it.
 */
export async function listSends(db: Db, accountId: string, channel: Channel, page: { limit: number; cursor?: string }) {
  let select = db.selectFrom('sends').selectAll().where('account_id', '=', accountId).where('channel', '=', channel);
  if (page.cursor !== undefined) {
    const [createdAt, id] = listingCursor.decode(page.cursor);
    select = select.where((eb) =>
      eb.or([eb('created_at', '<', createdAt), eb.and([eb('created_at', '=', createdAt), eb('id', '<', id)])]),
    );
  }
  const rows = await select
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(page.limit + 1)
    .execute();
  const { rows: shown, nextCursor } = listingCursor.page(rows, page.limit, (last) => [
    Number(last.created_at),
    last.id,
  ]);
  const counts = await statusCounts(
    db,
    shown.map((send) => send.id),
  );
  return { sends: shown.map((send) => ({ id: send.id, ...sendSummary(send, counts.get(send.id) ?? []) })), nextCursor };
}

export function groupBy<T>(rows: T[], key: (row: T) => number): Map<number, T[]> {
  const groups = new Map<number, T[]>();
  for (const row of rows) {
    const k = key(row);
    const list = groups.get(k);
    if (list) list.push(row);
    else groups.set(k, [row]);
  }
  return groups;
}
