import { sql, type Kysely, type Selectable } from 'kysely';
import type { DialectName } from '../db/dialect.ts';
import type { Schema } from '../db/schema.ts';
import { notFound } from '../errors.ts';
import { cursorCodec } from '../http/cursor.ts';
import { queries } from './queries.ts';
import type { Channel } from './recipients.ts';

/**
 * A send read back, whatever its channel: its totals by status word and a page of its
 * recipients with their history (under each channel's own read, sms/read.ts and
 * email/read.ts), and the listing of an account's sends.
 */

type Db = Kysely<Schema>;

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
  const word = (row: { status: string; due_at: number | null }) => recipientWord(send, row.status, row.due_at);
  const counts = (await statusCounts(db, [send.id])).get(send.id) ?? [];

  const after = page.cursor === undefined ? 0 : recipientCursor.decode(page.cursor)[0];
  let select = db.selectFrom('send_recipients').selectAll().where('send_id', '=', sendId).where('id', '>', after);
  // No index of its own: the page walks the send's recipients in id order until it has
  // `limit` of the word, so a rare word walks the whole send, as the totals above already do.
  // 100,000 recipients with one Failed: 212 ms against 199 ms unfiltered on SQLite, 109
  // against 83 ms on PostgreSQL; an index by status would cost every status change a write.
  const status = page.status === undefined ? undefined : storedStatus(send, page.status);
  if (status !== undefined && status !== null) {
    select = select.where('status', '=', status.status);
    if (status.held !== undefined) select = select.where('due_at', status.held ? 'is not' : 'is', null);
  }
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
    recipients: shown.map((row) => ({ ...row, status: word(row) })),
    historyOf: readHistory(send, channel, shown, history),
    ids,
    nextCursor,
  };
}

type HistoryRow = Selectable<Schema['recipient_history']>;

/** The words a message's history begins with, on each channel: before any other of the same millisecond. */
const FIRST_WORDS: Record<Channel, readonly string[]> = { sms: ['Queued', 'Submitted'], email: ['Processed'] };

/**
 * Each recipient's history as reads show it: what recipient_history holds, between the words
 * that the send's own times tell, which no row holds and so never post (ARCHITECTURE.md):
 * Scheduled at a scheduled send's creation; Queued, SMS's first word (email's history holds
 * SPEC §3's events only), when its message was queued: at the send's creation, or when a
 * scheduled one started; Cancelled when the send of a cancelled recipient was.
 */
export function readHistory(
  send: Selectable<Schema['sends']>,
  channel: Channel,
  rows: Array<{ id: number; status: string }>,
  recorded: HistoryRow[],
): Map<number, HistoryRow[]> {
  const entry = (recipientId: number, status: string, at: number | null): HistoryRow[] =>
    at === null ? [] : [{ recipient_id: recipientId, status, at: Number(at), url: null, reply: null, machine: null }];
  const scheduled = send.scheduled_at !== null;
  const queuedAt = channel === 'sms' ? (scheduled ? send.started_at : send.created_at) : null;
  const recordedOf = Map.groupBy(recorded, (h) => Number(h.recipient_id));
  // A record writes a message's first word and the next in the same millisecond (Processed then
  // Delivered; Submitted then a receipt's word), which no column orders but this.
  const first = FIRST_WORDS[channel];
  const inOrder = (a: HistoryRow, b: HistoryRow) =>
    Number(a.at) - Number(b.at) || Number(!first.includes(a.status)) - Number(!first.includes(b.status));
  return new Map(
    rows.map((row) => {
      const id = Number(row.id);
      return [
        id,
        [
          ...entry(id, 'Scheduled', scheduled ? send.created_at : null),
          ...entry(id, 'Queued', queuedAt),
          ...(recordedOf.get(id) ?? []).sort(inOrder),
          ...entry(id, 'Cancelled', row.status === 'Cancelled' ? send.completed_at : null),
        ],
      ];
    }),
  );
}

/**
 * A recipient's status word as reads show it: until its time comes, a scheduled send's Queued
 * recipients read Scheduled, and so does one held until its `due_at` (messaging/holds.ts).
 */
export const recipientWord = (send: { status: string }, status: string, dueAt: number | null = null) =>
  status === 'Queued' && (send.status === 'Scheduled' || dueAt !== null) ? 'Scheduled' : status;

/**
 * The stored status of the recipients that read `word` (recipientWord's inverse), and whether
 * they are held (`due_at` set) when that tells them apart; null when none can read it.
 */
function storedStatus(send: { status: string }, word: string): { status: string; held?: boolean } | null {
  if (word === 'Scheduled') return { status: 'Queued', held: send.status === 'Scheduled' ? undefined : true };
  if (word === 'Queued') return send.status === 'Scheduled' ? null : { status: 'Queued', held: false };
  return { status: word };
}

/** The word totals count the held recipients under: recipientWord's for a Queued one with a `due_at`. */
const HELD = 'Scheduled';

/** How many recipients of a send are at each status, with their parts. */
export interface StatusCount {
  status: string;
  n: number;
  parts: number | null;
}

/**
 * The sends' recipients counted by status, in one grouped read by the (send_id, id) index:
 * it visits each recipient of the sends once (about 1 µs each here; docs/api.md, "Sends, usage
 * and statistics", gives what a page of sends costs). Those Queued but held until a due time
 * (messaging/holds.ts) are counted apart, as Scheduled, from the partial index of the held.
 */
async function statusCounts(db: Db, sendIds: string[]): Promise<Map<string, StatusCount[]>> {
  if (sendIds.length === 0) return new Map();
  const held = await db
    .selectFrom('send_recipients')
    .select(['send_id', (eb) => eb.fn.countAll<number>().as('n')])
    .where('send_id', 'in', sendIds)
    .where('due_at', 'is not', null)
    .where('status', '=', 'Queued')
    .groupBy('send_id')
    .execute();
  const heldOf = new Map(held.map((row) => [row.send_id, Number(row.n)]));
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
  for (const { send_id: sendId, ...count } of rows) {
    const waiting = count.status === 'Queued' ? (heldOf.get(sendId) ?? 0) : 0;
    const split =
      waiting === 0
        ? [count]
        : [
            { ...count, n: Number(count.n) - waiting },
            { status: HELD, n: waiting, parts: null },
          ].filter((c) => c.n > 0);
    counts.set(sendId, [...(counts.get(sendId) ?? []), ...split]);
  }
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

const addressCursor = cursorCodec(['integer']);

/**
 * `GET /sms?recipient=`, `GET /email/batch?email=`: the account's sends of the channel that
 * include an address, held by a contact or not, a page at a time with the summaries listSends
 * gives. Found on the recipients' (address, id) index that replies and a contact's messages
 * already use (0017), newest recipient first; a send holds an address once (its key (send_id,
 * address)), so each send shows once. The order is that of the address's recipient rows: a
 * list's recipients are written when the send expands, so a scheduled send comes where it
 * started, not where it was made. No index more: every fan-out would write it.
 */
export async function listSendsTo(
  db: Db,
  dialect: DialectName,
  accountId: string,
  channel: Channel,
  page: { address: string; limit: number; cursor?: string },
) {
  const after = page.cursor === undefined ? null : addressCursor.decode(page.cursor)[0];
  const { rows } = await sql<Selectable<Schema['sends']> & { recipient_id: number }>`
    select s.*, r.id as recipient_id
      from send_recipients r ${queries[dialect].recipientsToSends} sends s on s.id = r.send_id
     where r.address = ${page.address} and s.account_id = ${accountId} and s.channel = ${channel}
       ${after === null ? sql`` : sql`and r.id < ${after}`}
     order by r.id desc
     limit ${page.limit + 1}`.execute(db);
  const { rows: shown, nextCursor } = addressCursor.page(rows, page.limit, (last) => [Number(last.recipient_id)]);
  const counts = await statusCounts(
    db,
    shown.map((send) => send.id),
  );
  return { sends: shown.map((send) => ({ id: send.id, ...sendSummary(send, counts.get(send.id) ?? []) })), nextCursor };
}

/**
 * `GET /messages/{messageId}`: one recipient's message by the id reads show (send_recipients.message_id,
 * set when it is handed over: recipientMessageId's, or an older random one), whatever its channel,
 * with its status word and its history as its send's read shows them. Found by
 * send_recipients_message_id (0022), partial on the ids there are, then the send by its key: two
 * index seeks. A recipient not yet handed over shows no messageId anywhere, so none is asked for.
 * Another account's message is as unknown as a missing one.
 */
export async function readMessage(db: Db, accountId: string, messageId: string) {
  const row = await db
    .selectFrom('send_recipients as r')
    .innerJoin('sends as s', 's.id', 'r.send_id')
    .select(['r.id', 'r.address', 'r.status', 'r.reason', 'r.message_id', 's.id as send_id'])
    .where('r.message_id', '=', messageId)
    .where('s.account_id', '=', accountId)
    .executeTakeFirst();
  if (!row) throw notFound('The message');
  const send = await db.selectFrom('sends').selectAll().where('id', '=', row.send_id).executeTakeFirstOrThrow();
  const channel = send.channel as Channel;
  const id = Number(row.id);
  const recorded = await db
    .selectFrom('recipient_history')
    .selectAll()
    .where('recipient_id', '=', id)
    .orderBy('at')
    .execute();
  const history = readHistory(send, channel, [{ id, status: row.status }], recorded).get(id) ?? [];
  return { channel, send, row: { ...row, status: recipientWord(send, row.status) }, history };
}

/**
 * When a recipient that reads Scheduled is due (ARCHITECTURE.md, "Preflight"): the `due_at`
 * it is held until (quiet hours, its own clock's time), else its send's scheduled time; null for one not waiting.
 */
export function dueAtOf(row: { status: string; due_at: number | null }, scheduledAt: string | null): string | null {
  if (row.status !== 'Scheduled') return null;
  return row.due_at === null ? scheduledAt : iso(Number(row.due_at));
}
