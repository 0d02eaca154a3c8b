import type { Expression, ExpressionBuilder, Kysely } from 'kysely';
import type { Clock } from '../clock.ts';
import type { Database, DialectName } from '../db/database.ts';
import { procedure } from '../db/procedure.ts';
import type { Schema } from '../db/schema.ts';
import type { Lease } from '../queue/queries.ts';
import { completeJob, keepJob, SnoozeJob, type JobRun } from '../queue/worker.ts';
import { appendWebhookEvents } from '../webhooks/events.ts';
import { queries } from './queries.ts';
import { UsageTally } from './rollup.ts';
import type { Channel } from './recipients.ts';

/**
 * A send's pages, whatever its channel (MESSAGING.md): once started (accept.ts), its
 * recipients go a page at a time — read after the send's cursor, rendered, handed to the
 * transport, their results recorded with the cursor in one commit — until none is left, the
 * last page's record finishing the send. Each channel supplies those steps once, as a
 * PageChannel (src/sms/send.ts, src/email/send.ts); sendInPages drives them.
 */

type Db = Kysely<Schema>;

/** Recipients handed over and recorded together: one commit a page. */
export const PAGE = 500;

/** A send with messages refused for now tries them again after this long. */
export const RETRY_LATER_MS = 5_000;

/**
 * How a send's last page ended: done, or messages remain, to look at again at `retryAt` (epoch
 * ms): refused for now, or held until their due time (`why` says which, for the job's record).
 */
export type Finish = 'completed' | { retryAt: number; why?: string };

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

/**
 * Starts a send, a range of its expansion a call, until it is expanded: its start, or null
 * when there is nothing to send.
 *
 * An expansion of more than one range reads its lists' tables with fresh statistics and is
 * followed by the database's step after one: on PostgreSQL ANALYZEs (messaging/queries.ts says why).
 */
export async function expandedSend<T>(
  deps: { database: Database; clock: Clock },
  run: JobRun,
  start: () => Promise<T | 'expanding' | null>,
): Promise<T | null> {
  let started = await start();
  let ranges = 0;
  while (started === 'expanding') {
    if (++ranges === 1) await queries[deps.database.dialect].listsFresh(deps.database.db);
    if (run.signal.aborted) throw new SnoozeJob(deps.clock.now(), 'the worker is stopping');
    started = await start();
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

/**
 * What a channel does with each page of a send, in the order sendInPages calls it: render
 * the page's messages, hand them to its transport, record what the transport said. Each
 * step's answer is only the next one's argument, so how a channel renders (email ahead, on
 * its render threads) stays its own.
 */
export interface PageChannel<Rendered, Handed> extends Pending {
  /**
   * Whether the next page may be handed over before this one is recorded: only where a crash
   * then resends no more than it would anyway, because the transport records each message's
   * answer as it comes and a resend skips what was answered (SMPP's journal).
   */
  handsAhead?: boolean;
  /**
   * The page's messages. `next` is the page after it, being read meanwhile, for a channel
   * that renders ahead; null when that page is read only after this one's record.
   */
  render(rows: PageRow[], next: Promise<PageRow[]> | null): Promise<Rendered>;
  /** The messages to the transport, with what it answered for each. */
  handOver(rendered: Rendered, signal: AbortSignal): Promise<Handed>;
  /**
   * The page's results in one transaction with the send's cursor (the highest recipient id
   * handed so far), so a worker that dies after it resumes with the next page; on the send's
   * last page (`last`: a short page) the same transaction finishes the send. The transaction
   * holds the job's `lease` or undoes itself: a run whose lease lapsed, the job claimed again
   * by another worker, stops at its page instead of sending the rest beside that one.
   */
  record(handed: Handed, page: { cursor: number; lease: Lease; last: boolean }): Promise<'more' | Finish>;
}

/**
 * A send's pages from its cursor until none is left, each rendered, handed over and
 * recorded by its channel, records in page order. When messages refused for now remain at
 * the end, the job is snoozed until the time the finish names.
 *
 * The next page is read while a page is handed over, when its record cannot change what that
 * read sees: a full page of first tries (none refused before) records only its own rows, all
 * behind the cursor, and those it defers are not due before their wait. A page holding
 * retries is read after its record: until then they are still due, and email's read of the
 * retries due (email/record.ts, loadEmailPage) would find them again.
 *
 * Nothing of the next page is handed over before this one is recorded (a crash resends one
 * page at most), unless the channel hands ahead (PageChannel's `handsAhead`): then the page read
 * ahead is handed over as soon as it is rendered and the page before the current one is
 * recorded, so the transport always holds the next page's messages behind the current one's
 * and never idles while a page is recorded or a slower connection finishes its share.
 */
export async function sendInPages<Rendered, Handed>(
  deps: { clock: Clock },
  run: JobRun,
  send: { cursor: number; firstPage: PageRow[] },
  channel: PageChannel<Rendered, Handed>,
): Promise<'completed'> {
  const { clock } = deps;
  let cursor = send.cursor;
  let finished: Finish | undefined;
  /** The record of the page handed over before the current one, when it was handed ahead. */
  let before: Promise<'more' | Finish> | null = null;
  try {
    for (let rows = send.firstPage; ; ) {
      if (run.signal.aborted) throw new SnoozeJob(clock.now(), 'the worker is stopping');
      if (rows.length === 0) {
        await before;
        before = null;
        finished = await channel.finish(run.lease);
        break;
      }
      cursor = Math.max(cursor, ...rows.map((row) => Number(row.id)));
      const page = { cursor, lease: run.lease, last: rows.length < PAGE };
      const next = !page.last && rows.every((row) => row.attempts === 0) ? channel.load(cursor) : null;
      // A job that stops after this page never reads what was read ahead; its failure is the next turn's to throw.
      next?.catch(() => undefined);
      const rendered = await channel.render(rows, next);
      const handing = channel.handOver(rendered, run.signal);
      const recordedBefore = before;
      const recorded = handing.then(async (handed) => {
        await recordedBefore;
        return channel.record(handed, page);
      });
      if (next !== null && channel.handsAhead === true) {
        // Two pages unrecorded at most: this one, and the next once this one's predecessor is recorded.
        recorded.catch(() => undefined);
        before = recorded;
        await recordedBefore;
        rows = await next;
        continue;
      }
      before = null;
      const result = await recorded;
      if (result !== 'more') {
        finished = result;
        break;
      }
      rows = await (next ?? channel.load(cursor));
    }
  } finally {
    // A page handed ahead is recorded, or has failed, before the job's run ends.
    await before?.catch(() => undefined);
  }
  if (finished !== 'completed') {
    throw new SnoozeJob(finished.retryAt, finished.why ?? 'messages refused for now are tried again');
  }
  return 'completed';
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

/**
 * The next page of a send's recipients still to send (status in `pending`), after the cursor,
 * in id order; not those held until a due time (`due_at`, messaging/holds.ts) until released
 * (recipients.ts, releaseDueRecipients).
 */
export async function loadPage(
  db: Db,
  accountId: string,
  sendId: string,
  after: number,
  pending: readonly string[],
): Promise<PageRow[]> {
  return pageRows(db, accountId, sendId)
    .where('r.status', 'in', pending)
    .where('r.due_at', 'is', null)
    .where('r.id', '>', after)
    .orderBy('r.id')
    .limit(PAGE)
    .execute() as Promise<PageRow[]>;
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
export function rowProperties(
  row: Pick<PageRow, 'properties'>,
  names: Map<string, string>,
): Map<string, string> | null {
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
 * start of the send after RETRY_LATER_MS; or recipients held until a due time (`due_at`, by
 * the partial index send_recipients_due), when the send is looked at again at the earliest.
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
    .where('due_at', 'is', null)
    .executeTakeFirst();
  const held = waiting
    ? undefined
    : await trx
        .selectFrom('send_recipients')
        .select((eb) => eb.fn.min('due_at').as('at'))
        .where('send_id', '=', sendId)
        .where('due_at', 'is not', null)
        .where('status', 'in', pending)
        .executeTakeFirst();
  const dueAt = held?.at === null || held?.at === undefined ? null : Number(held.at);
  if (waiting || dueAt !== null) {
    await trx.updateTable('sends').set({ cursor: 0 }).where('id', '=', sendId).execute();
    return waiting
      ? { retryAt: now + RETRY_LATER_MS }
      : { retryAt: dueAt!, why: 'held recipients wait for their time' };
  }
  return completeSend(trx, sendId, now, lease);
}

/** A page that is not the send's last, recorded in the caller's transaction while it holds the job. */
export async function keptJob(trx: Db, lease: Lease): Promise<'more'> {
  await keepJob(trx, lease);
  return 'more';
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
    await appendWebhookEvents(trx, clock, {
      accountId: send.account_id,
      url: send.webhook_url,
      type: args.webhookType,
      events: ended.map((r) => args.event(r, reason, now)),
    });
  }
  await trx
    .updateTable('sends')
    .set({ status: 'Completed', completed_at: now })
    .where('id', '=', args.sendId)
    .execute();
  await tally.write(trx, dialect);
}
