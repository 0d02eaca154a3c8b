import type { Kysely } from 'kysely';
import type { Schema } from '../db/schema.ts';
import { cursorCodec } from '../http/cursor.ts';
import { contentState, dueAtOf, readSendPage, type ContentState, type SendReadPage } from '../messaging/reads.ts';
import type { EmailSendContent } from './accept.ts';
import { sandboxRawPlace } from './accept.ts';
import { open, type Keyring } from '../sealed.ts';

type Db = Kysely<Schema>;

const iso = (ms: number) => new Date(ms).toISOString();

/** A batch's content as its reads show it: all null unless it is still available. */
export function emailContentView(stored: EmailSendContent, state: ContentState) {
  return state === 'available'
    ? {
        senderFrom: stored.from.email,
        senderName: stored.from.displayName ?? null,
        subject: stored.subject,
        preHeaderText: stored.preheader ?? null,
        html: stored.html,
      }
    : { senderFrom: null, senderName: null, subject: null, preHeaderText: null, html: null };
}
const sandboxCursor = cursorCodec(['integer']);

const ENGAGEMENT = {
  Open: 'opened',
  Click: 'clicked',
  Unsubscribe: 'unsubscribed',
  'Spam Report': 'complaints',
} as const;

/**
 * How many of a batch's recipients had each event at least once: the funnel's lower steps,
 * which its totals (each recipient's one status word) cannot give. A walk of the batch's
 * recipients and their history by their indexes.
 */
async function engagementOf(
  db: Db,
  sendId: string,
): Promise<Record<(typeof ENGAGEMENT)[keyof typeof ENGAGEMENT], number>> {
  const rows = await db
    .selectFrom('recipient_history as h')
    .innerJoin('send_recipients as r', 'r.id', 'h.recipient_id')
    .select(['h.status', (eb) => eb.fn.count<number>('h.recipient_id').distinct().as('recipients')])
    .where('r.send_id', '=', sendId)
    .where('h.status', 'in', Object.keys(ENGAGEMENT))
    .groupBy('h.status')
    .execute();
  const engagement = { opened: 0, clicked: 0, unsubscribed: 0, complaints: 0 };
  for (const row of rows) engagement[ENGAGEMENT[row.status as keyof typeof ENGAGEMENT]] = Number(row.recipients);
  return engagement;
}

/**
 * `GET /email/batch/{batchId}` (ARCHITECTURE.md): the batch, its totals by status word, the
 * recipients who opened, clicked, unsubscribed and complained, and a page of its recipients in
 * id order, each with its events: `url` on a Click, `reply` (the SMTP reply) on a Deferred or
 * Bounce, `machine` on an Open or Click. Its `content`: the sender, subject, preheader and
 * HTML as accepted (the campaign's as it was then), before each recipient's tags fill them,
 * unless purged.
 */
export async function readEmailBatch(db: Db, accountId: string, sendId: string, page: SendReadPage) {
  const read = await readSendPage(db, accountId, 'email', sendId, page, 'The email batch');
  const shown = contentState(read.send, false);
  const stored = JSON.parse(read.send.content) as EmailSendContent;
  return {
    batchId: read.send.id,
    status: read.summary.status,
    createdAt: read.summary.createdAt,
    scheduledAt: read.summary.scheduledAt,
    totals: read.summary.totals,
    engagement: await engagementOf(db, read.send.id),
    contentState: shown,
    content: emailContentView(stored, shown),
    recipients: read.recipients.map((row) => ({
      email: row.address,
      messageId: row.message_id,
      status: row.status,
      reason: row.reason,
      dueAt: dueAtOf(row, read.summary.scheduledAt),
      history: (read.historyOf.get(Number(row.id)) ?? []).map((h) => ({
        event: h.status,
        at: iso(h.at),
        ...(h.url === null ? {} : { url: h.url }),
        ...(h.reply === null ? {} : { reply: h.reply }),
        ...(h.machine === null ? {} : { machine: Boolean(h.machine) }),
      })),
    })),
    nextCursor: read.nextCursor,
  };
}

/** `GET /sandbox/email`: what the sandbox transport took for the account, newest first, each message as raw MIME. */
export async function readSandboxEmail(
  db: Db,
  keys: Keyring,
  accountId: string,
  query: { to?: string; limit: number; cursor?: string },
) {
  let select = db.selectFrom('sandbox_email').selectAll().where('account_id', '=', accountId);
  if (query.to !== undefined) select = select.where('recipient', '=', query.to);
  if (query.cursor !== undefined) select = select.where('id', '<', sandboxCursor.decode(query.cursor)[0]);
  const read = await select
    .orderBy('id', 'desc')
    .limit(query.limit + 1)
    .execute();
  const { rows, nextCursor } = sandboxCursor.page(read, query.limit, (last) => [Number(last.id)]);
  return {
    messages: rows.map((row) => ({
      batchId: row.send_id,
      messageId: row.message_id,
      to: row.recipient,
      raw: row.opens ? open(keys, row.raw, sandboxRawPlace(row.message_id)) : row.raw,
      at: iso(row.created_at),
    })),
    nextCursor,
  };
}
