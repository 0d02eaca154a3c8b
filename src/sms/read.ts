import { money } from '../messaging/money.ts';
import type { Kysely } from 'kysely';
import type { Schema } from '../db/schema.ts';
import { cursorCodec } from '../http/cursor.ts';
import { contentState, dueAtOf, readSendPage, type SendReadPage } from '../messaging/reads.ts';
import { recipientClicks, sendClicks, type ClickView } from '../links/clicks.ts';
import type { StoredSmsContent } from './accept.ts';
import { open, type Keyring } from '../sealed.ts';
import { sandboxTextPlace } from './sealing.ts';

type Db = Kysely<Schema>;

const iso = (ms: number) => new Date(ms).toISOString();
const sandboxCursor = cursorCodec(['integer']);

/**
 * `GET /sms/{queueId}` (ARCHITECTURE.md): the send, its totals by status word, and a page of
 * its recipients in id order, each with its history and its parts as the operator took them,
 * and, when it carried a landing page link, its clicks: each recipient's own (isUniqueUrl),
 * and the count of them all, which alone counts a link the recipients share. Its `content`:
 * the sender name and body as the request gave them (tags unfilled), unless sealed or purged.
 */
export async function readSms(db: Db, accountId: string, sendId: string, page: SendReadPage) {
  const read = await readSendPage(db, accountId, 'sms', sendId, page, 'The SMS');
  const { ids, send } = read;
  // Billed once the operator took it (GET /usage's rule): a Failed message counts the parts the
  // operator took (sms_parts: all of them when its receipt failed, those taken before a refusal),
  // none when the SMSC refused it whole.
  let partsBilled = 0;
  for (const row of read.counts)
    if (row.status !== 'Failed' && row.status !== 'NotSent') partsBilled += Number(row.parts ?? 0);
  if (read.counts.some((row) => row.status === 'Failed')) {
    const failedTaken = await db
      .selectFrom('sms_parts as p')
      .innerJoin('send_recipients as r', 'r.id', 'p.recipient_id')
      .select((eb) => eb.fn.countAll<number>().as('parts'))
      .where('r.send_id', '=', send.id)
      .where('r.status', '=', 'Failed')
      .executeTakeFirst();
    partsBilled += Number(failedTaken?.parts ?? 0);
  }
  const stored = JSON.parse(send.content) as StoredSmsContent;
  const shown = contentState(send, 'sealed' in stored);
  const linked = stored.landingPageId !== null;
  const parts =
    ids.length === 0
      ? []
      : await db.selectFrom('sms_parts').selectAll().where('recipient_id', 'in', ids).orderBy('part').execute();
  const [clicksOf, clicks] = linked
    ? await Promise.all([recipientClicks(db, ids), sendClicks(db, send.id)])
    : [new Map<number, ClickView[]>(), 0];
  const partsOf = Map.groupBy(parts, (p) => Number(p.recipient_id));

  return {
    queueId: send.id,
    status: read.summary.status,
    createdAt: read.summary.createdAt,
    scheduledAt: read.summary.scheduledAt,
    totals: read.summary.totals,
    partsBilled,
    clicks,
    contentState: shown,
    content:
      shown === 'available' && 'body' in stored
        ? { senderName: stored.senderName, body: stored.body }
        : { senderName: null, body: null },
    recipients: read.recipients.map((row) => ({
      recipient: row.address,
      messageId: row.message_id,
      status: row.status,
      reason: row.reason,
      dueAt: dueAtOf(row, read.summary.scheduledAt),
      parts: row.parts,
      encoding: row.encoding,
      replacedCharacters: row.replaced_characters,
      error: row.error,
      errorCode: row.error_code,
      smsc: row.smsc,
      price: row.price_micros === null || row.currency === null ? null : money(Number(row.price_micros), row.currency),
      history: (read.historyOf.get(Number(row.id)) ?? []).map((h) => ({ status: h.status, at: iso(h.at) })),
      partStatus: (partsOf.get(Number(row.id)) ?? []).map((p) => ({
        part: p.part,
        operatorMessageId: p.operator_message_id,
        status: p.status,
      })),
      clicks: clicksOf.get(Number(row.id)) ?? [],
    })),
    nextCursor: read.nextCursor,
  };
}

export interface SandboxQuery {
  recipient?: string;
  limit: number;
  cursor?: string;
}

/** One page of the sandbox's parts for an account, newest first: a seek on an index that leads with the account. */
export function sandboxPageQuery(db: Db, accountId: string, query: SandboxQuery) {
  let select = db.selectFrom('sandbox_sms').selectAll().where('account_id', '=', accountId);
  if (query.recipient !== undefined) select = select.where('recipient', '=', query.recipient);
  if (query.cursor !== undefined) select = select.where('id', '<', sandboxCursor.decode(query.cursor)[0]);
  return select.orderBy('id', 'desc').limit(query.limit + 1);
}

/**
 * `GET /sandbox/sms`: what the sandbox transport took for the account, newest first, each part
 * as text. A part of an isBodyEncrypted send reads `text: null, encrypted: true`: its text is
 * a secret the account's token does not open (SPEC §2.1: "stored/handled encrypted"); but a
 * code Herald made (Verify) is opened for its account, so a newcomer can finish a verification
 * with no SMSC: the sandbox is for development.
 */
export async function readSandboxSms(db: Db, keys: Keyring, accountId: string, query: SandboxQuery) {
  const read = await sandboxPageQuery(db, accountId, query).execute();
  const { rows, nextCursor } = sandboxCursor.page(read, query.limit, (last) => [Number(last.id)]);
  return {
    messages: rows.map((row) => ({
      queueId: row.send_id,
      messageId: row.message_id,
      recipient: row.recipient,
      senderName: row.sender,
      part: row.part,
      parts: row.parts,
      encoding: row.encoding,
      text: row.sealed
        ? row.opens
          ? open(keys, row.text, sandboxTextPlace(row.message_id, row.part))
          : null
        : row.text,
      encrypted: Boolean(row.sealed),
      at: iso(row.created_at),
    })),
    nextCursor,
  };
}
