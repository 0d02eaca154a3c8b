import type { Kysely } from 'kysely';
import type { Schema } from '../db/schema.ts';
import { notFound } from '../errors.ts';
import { cursorCodec } from '../http/cursor.ts';
import { recipientClicks, sendClicks, type ClickView } from '../links/clicks.ts';
import type { SmsContent } from './accept.ts';

type Db = Kysely<Schema>;

const iso = (ms: number) => new Date(ms).toISOString();
const cursor = cursorCodec(['integer']);

/**
 * `GET /sms/{queueId}` (ARCHITECTURE.md): the send, its totals by status word, and a page of
 * its recipients in id order, each with its history and its parts as the operator took them,
 * and, when it carried a landing page link, its clicks: each recipient's own (isUniqueUrl),
 * and the count of them all, which alone counts a link the recipients share.
 */
export async function readSms(db: Db, accountId: string, sendId: string, page: { limit: number; cursor?: string }) {
  const send = await db
    .selectFrom('sends')
    .selectAll()
    .where('id', '=', sendId)
    .where('account_id', '=', accountId)
    .where('channel', '=', 'sms')
    .executeTakeFirst();
  if (!send) throw notFound('The SMS');
  // Until its time comes, a scheduled send's recipients are Scheduled rather than Queued.
  const word = (status: string) => (status === 'Queued' && send.status === 'Scheduled' ? 'Scheduled' : status);

  const counts = await db
    .selectFrom('send_recipients')
    .select(['status', (eb) => eb.fn.countAll<number>().as('n'), (eb) => eb.fn.sum<number>('parts').as('parts')])
    .where('send_id', '=', sendId)
    .groupBy('status')
    .execute();
  const totals: Record<string, number> = {};
  let partsBilled = 0;
  for (const row of counts) {
    totals[word(row.status)] = Number(row.n);
    if (row.status !== 'Failed' && row.status !== 'NotSent') partsBilled += Number(row.parts ?? 0);
  }

  const after = page.cursor === undefined ? 0 : cursor.decode(page.cursor)[0];
  const rows = await db
    .selectFrom('send_recipients')
    .selectAll()
    .where('send_id', '=', sendId)
    .where('id', '>', after)
    .orderBy('id')
    .limit(page.limit + 1)
    .execute();
  const { rows: shown, nextCursor } = cursor.page(rows, page.limit, (last) => [Number(last.id)]);
  const ids = shown.map((row) => Number(row.id));
  const linked = (JSON.parse(send.content) as SmsContent).landingPageId !== null;
  const [history, parts] =
    ids.length === 0
      ? [[], []]
      : await Promise.all([
          db.selectFrom('recipient_history').selectAll().where('recipient_id', 'in', ids).orderBy('at').execute(),
          db.selectFrom('sms_parts').selectAll().where('recipient_id', 'in', ids).orderBy('part').execute(),
        ]);
  const [clicksOf, clicks] = linked ? await Promise.all([recipientClicks(db, ids), sendClicks(db, send.id)]) : [new Map<number, ClickView[]>(), 0];
  const historyOf = group(history, (h) => Number(h.recipient_id));
  const partsOf = group(parts, (p) => Number(p.recipient_id));

  return {
    queueId: send.id,
    status: send.status,
    createdAt: iso(send.created_at),
    scheduledAt: send.scheduled_at === null ? null : iso(send.scheduled_at),
    totals,
    partsBilled,
    clicks,
    recipients: shown.map((row) => ({
      recipient: row.address,
      messageId: row.message_id,
      status: word(row.status),
      reason: row.reason,
      parts: row.parts,
      encoding: row.encoding,
      error: row.error,
      history: [{ status: 'Queued', at: iso(send.created_at) }, ...(historyOf.get(Number(row.id)) ?? []).map((h) => ({ status: h.status, at: iso(h.at) }))],
      partStatus: (partsOf.get(Number(row.id)) ?? []).map((p) => ({ part: p.part, operatorMessageId: p.operator_message_id, status: p.status })),
      clicks: clicksOf.get(Number(row.id)) ?? [],
    })),
    nextCursor,
  };
}

function group<T>(rows: T[], key: (row: T) => number): Map<number, T[]> {
  const groups = new Map<number, T[]>();
  for (const row of rows) {
    const k = key(row);
    const list = groups.get(k);
    if (list) list.push(row);
    else groups.set(k, [row]);
  }
  return groups;
}

/**
 * `GET /sandbox/sms`: what the sandbox transport took for the account, newest first, each part
 * as text. A part of an isBodyEncrypted send reads `text: null, encrypted: true`: its text is
 * a secret the account's token does not open (SPEC §2.1: "stored/handled encrypted").
 */
export async function readSandboxSms(db: Db, accountId: string, query: { recipient?: string; limit: number }) {
  let select = db.selectFrom('sandbox_sms').selectAll().where('account_id', '=', accountId);
  if (query.recipient !== undefined) select = select.where('recipient', '=', query.recipient);
  const rows = await select.orderBy('id', 'desc').limit(query.limit).execute();
  return {
    messages: rows.map((row) => ({
      queueId: row.send_id,
      messageId: row.message_id,
      recipient: row.recipient,
      senderName: row.sender,
      part: row.part,
      parts: row.parts,
      encoding: row.encoding,
      text: row.sealed ? null : row.text,
      encrypted: Boolean(row.sealed),
      at: iso(row.created_at),
    })),
  };
}
