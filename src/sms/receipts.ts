import { type Expression, sql, type Kysely, type SqlBool } from 'kysely';
import type { Clock } from '../clock.ts';
import { CONCURRENT_WRITES, type DialectName } from '../db/dialect.ts';
import { chunkOf } from '../db/chunks.ts';
import type { ProcedureDatabase } from '../db/procedure.ts';
import type { Schema } from '../db/schema.ts';
import { appendToStreams } from '../webhooks/events.ts';
import { isAnyOf } from '../db/in-json.ts';
import { isErased } from '../messaging/erased-identifiers.ts';
import { UsageTally } from '../messaging/rollup.ts';
import { notFinal, queries, stillOpen } from './queries.ts';

type Db = Kysely<Schema>;

/**
 * A part as receipts name it: the operator's id, within the connection that took the part (two
 * SMSCs may hand out the same id).
 */
export interface PartKey {
  smsc: string;
  operatorMessageId: string;
}

/**
 * What an operator reported of one part: its id, and the receipt's state (SMPP's `stat`); with
 * the number it reports on when the transport reads one (SMPP's source address), which a
 * receipt that has to wait keeps: it then matches a part of that number only.
 */
export interface Receipt extends PartKey {
  state: string;
  errorCode: string | null;
  recipient?: string;
}

const keyOf = (part: { smsc: string; operator_message_id: string }) => `${part.smsc}\n${part.operator_message_id}`;
/** One string for a part's key: a map's key within a page or a group of receipts. */
export const keyOfPart = (part: PartKey) => `${part.smsc}\n${part.operatorMessageId}`;

/** ARCHITECTURE.md's words for a receipt's state; a state it does not name leaves the part as it is. */
export const PART_STATUS: Record<string, 'Processed' | 'Delivered' | 'Failed'> = {
  ENROUTE: 'Processed',
  ACCEPTD: 'Processed',
  DELIVRD: 'Delivered',
  UNDELIV: 'Failed',
  REJECTD: 'Failed',
  EXPIRED: 'Failed',
  DELETED: 'Failed',
  UNKNOWN: 'Failed',
};

/**
 * A message is Delivered when every part is, Failed when any part fails, Processed when a part is
 * reported under way.
 */
export function messageStatus(parts: string[]): string | undefined {
  if (parts.includes('Failed')) return 'Failed';
  if (parts.every((status) => status === 'Delivered')) return 'Delivered';
  if (parts.includes('Processed')) return 'Processed';
  return undefined;
}

export const UNDELIVERED = 'the operator reported the message undelivered';

/** The webhook event type of SMS status changes (ARCHITECTURE.md). */
export const SMS_STATUS_TYPE = 'sms.status';

/** One event of an sms.status post (ARCHITECTURE.md's body), `at` in epoch ms: every SMS status change is posted so. */
export function smsStatusEvent(e: {
  queueId: string;
  messageId: string | null;
  recipient: string;
  status: string;
  errorCode: string | null;
  error: string | null;
  parts: number | null;
  at: number;
}) {
  return {
    queueId: e.queueId,
    messageId: e.messageId,
    recipient: e.recipient,
    status: e.status,
    errorCode: e.errorCode,
    error: e.error,
    parts: e.parts,
    at: new Date(e.at).toISOString(),
  };
}

/**
 * Applies receipts, in the caller's transaction. Every receipt is kept first, then matched to
 * its part by the operator's id: a receipt can come before its submit's result is recorded
 * (the operator answered both before Herald wrote either), and waits in sms_receipts until
 * recordSmsPage writes the part and calls this again with the part's ids (`parts`). Each
 * message whose word changes gets it, its history and its webhook event.
 *
 * Answers the ids it left waiting on PostgreSQL, where a receipt and its part can be written
 * by concurrent transactions, each blind to the other's uncommitted row: the caller hands
 * them to matchWaiting once its transaction has committed. Of the two writers, the one that
 * commits second finds both rows there; a receipt is taken by the delete that matches it
 * (takeMatched), so when both look, one applies it. (A global lock did this before, and
 * every receipt waited for every page.)
 */
export async function applyReceipts(
  db: Db,
  dialect: DialectName,
  clock: Clock,
  input: { receipts: Receipt[]; parts?: PartKey[] },
  tally?: UsageTally,
): Promise<PartKey[]> {
  const now = clock.now();
  // One receipt a part, the last given unless it would undo a final one (stillOpen): an SMSC may
  // offer one twice (its answer was lost with a connection), and PostgreSQL refuses an upsert
  // that touches a row twice.
  const latest = new Map<string, Receipt>();
  for (const receipt of input.receipts) {
    const status = PART_STATUS[receipt.state];
    const before = latest.get(keyOfPart(receipt));
    if (status === undefined || (status === 'Processed' && before && PART_STATUS[before.state] !== 'Processed'))
      continue;
    latest.set(keyOfPart(receipt), receipt);
  }
  const known = [...latest.values()];
  if (known.length > 0) {
    await db
      .insertInto('sms_receipts')
      .values(
        known.map((r) => ({
          smsc: r.smsc,
          operator_message_id: r.operatorMessageId,
          status: PART_STATUS[r.state],
          error_code: r.errorCode,
          at: now,
          recipient: r.recipient ?? null,
        })),
      )
      .onConflict((oc) =>
        oc
          .columns(['smsc', 'operator_message_id'])
          .doUpdateSet((eb) => ({
            status: eb.ref('excluded.status'),
            error_code: eb.ref('excluded.error_code'),
            at: eb.ref('excluded.at'),
            recipient: eb.ref('excluded.recipient'),
          }))
          .where(stillOpen(sql.ref('sms_receipts.status'), sql.ref('excluded.status'))),
      )
      .execute();
  }
  const keys = [...new Map([...known, ...(input.parts ?? [])].map((part) => [keyOfPart(part), part])).values()].map(
    ({ smsc, operatorMessageId }) => ({ smsc, operatorMessageId }),
  );
  if (keys.length === 0) return [];
  const { matched } = await takeMatched(db, dialect, { ids: idsOf(keys) });
  const counted = tally ?? new UsageTally(now);
  await applyMatched(db, dialect, now, matched, counted);
  if (!tally) await counted.write(db, dialect);
  if (!CONCURRENT_WRITES[dialect]) return [];
  const found = new Set(matched.map(keyOf));
  return keys.filter((key) => !found.has(keyOfPart(key)));
}

/**
 * On PostgreSQL, matches again what a committed transaction's applyReceipts left waiting
 * (its answer): first a read, since nearly always nothing of it has come meanwhile.
 */
export async function matchWaiting(db: Db, dialect: DialectName, now: number, waiting: PartKey[]): Promise<void> {
  if (!CONCURRENT_WRITES[dialect] || waiting.length === 0) return;
  const ids = idsOf(waiting);
  const arrived = await db
    .selectFrom('sms_receipts')
    .select('operator_message_id')
    .where(isAnyOf(dialect, 'operator_message_id', ids))
    .limit(1)
    .execute();
  if (arrived.length === 0) return;
  await db.transaction().execute(async (trx) => {
    const tally = new UsageTally(now);
    await applyMatched(trx, dialect, now, (await takeMatched(trx, dialect, { ids })).matched, tally);
    await tally.write(trx, dialect);
  });
}

/**
 * Applies every kept receipt whose part is recorded, up to `limit`: what matchWaiting did not
 * get to (its process died between the two transactions). Answers how many it took: a chunk
 * may apply fewer (an erased person's receipt is taken and applies nothing), and a short count
 * ends the sweep's loop.
 */
export async function applyStranded(db: Db, dialect: DialectName, now: number, limit: number): Promise<number> {
  return db.transaction().execute(async (trx) => {
    const { taken, matched } = await takeMatched(trx, dialect, { limit });
    const tally = new UsageTally(now);
    await applyMatched(trx, dialect, now, matched, tally);
    await tally.write(trx, dialect);
    return taken;
  });
}

/**
 * How much earlier than a part's submit a receipt may have been kept and still be its own: the
 * clocks of the processes that submit and that receive (on several hosts) may differ, and a
 * part's submit time is its page's start, or an earlier try's answer.
 */
export const RECEIPT_CLOCK_SKEW_MS = 5 * 60_000;

interface Matched {
  recipient_id: number | string;
  part: number;
  smsc: string;
  operator_message_id: string;
  status: string;
  error_code: string | null;
}

const idsOf = (keys: PartKey[]) => [...new Set(keys.map((key) => key.operatorMessageId))];

/** The number of the recipient `recipientId` names, read by its key. */
const addressOf = (recipientId: Expression<unknown>) =>
  sql<string>`(select r.address from send_recipients r where r.id = ${recipientId})`;

/**
 * Whether a kept receipt (sms_receipts) is a part's own, of the parts (sms_parts as p) `ofParts`
 * admits, by takeMatched's rule: its connection and id, its number if it names one, a final
 * receipt only for a part not final yet, and not kept from before the part's submit.
 */
export const ownPartAmong = (ofParts: Expression<SqlBool>) =>
  sql<SqlBool>`exists (select 1 from sms_parts p
                        where p.operator_message_id = sms_receipts.operator_message_id
                          and p.smsc = sms_receipts.smsc and ${ofParts}
                          and (sms_receipts.recipient is null
                               or sms_receipts.recipient = ${addressOf(sql.ref('p.recipient_id'))})
                          and (sms_receipts.status = 'Processed' or ${notFinal(sql.ref('p.status'))})
                          and (p.submitted_at is null
                               or sms_receipts.at >= p.submitted_at - ${RECEIPT_CLOCK_SKEW_MS}))`;

/**
 * Deletes the kept receipts of these operator ids (or any, up to a limit) whose part is
 * recorded, and answers how many it took, and those of them it matched with their parts. The
 * delete is what makes a receipt applied once: of two transactions that match it, the second's
 * delete waits for the first and then finds it gone.
 * Looked up by the operator's ids (sms_parts_operator), matched within their connection; a
 * receipt of another connection that shares an id and whose part is recorded is taken with
 * them, and applied to its own part.
 *
 * An SMSC hands an id out again (one that restarts counts from 1 again; a counter wraps), so
 * a receipt that names its number matches a part of that number only, and a final receipt
 * matches only a part not final yet: the receipt for a new part can come before that part is
 * recorded, and matched to an old, final part with its id it would be used up there. It waits
 * instead; the rare final receipt an SMSC offers twice waits for the retention sweep. An
 * intermediate one (ENROUTE) is used up on a final part, which it leaves as it is. A receipt
 * kept from before a part was submitted is not that part's (a receipt offered twice for an
 * earlier message of the same number, waiting when a new part takes its id): it matches a part
 * submitted no later than RECEIPT_CLOCK_SKEW_MS after it came.
 *
 * A part of an erased person's message knows their number only as its hash: a receipt kept
 * under that hash (the SMPP journal keeps it so, never the number) is taken by it, and applied
 * to nothing (docs/privacy.md: nothing that comes back for an erased message is recorded).
 */
async function takeMatched(
  db: Db,
  dialect: DialectName,
  which: { ids: string[] } | { limit: number },
): Promise<{ taken: number; matched: Matched[] }> {
  // Given the ids, both tables are held to them, so that neither is read whole whatever the plan.
  // A part's number is read by its recipient's key (a subquery a part), not by a join: without
  // statistics (a table filled since its last ANALYZE) PostgreSQL hashed the join over every
  // recipient, a scan of send_recipients for each group of receipts.
  const hasPart = ownPartAmong('ids' in which ? isAnyOf(dialect, 'p.operator_message_id', which.ids) : sql`true`);
  const taken = await db
    .deleteFrom('sms_receipts')
    .where(hasPart)
    .where((eb) =>
      'ids' in which
        ? isAnyOf(dialect, 'operator_message_id', which.ids)
        : eb(
            'operator_message_id',
            'in',
            eb.selectFrom('sms_receipts').select('operator_message_id').where(hasPart).limit(which.limit),
          ),
    )
    .returning(['smsc', 'operator_message_id', 'status', 'error_code', 'recipient', 'at'])
    .execute();
  if (taken.length === 0) return { taken: 0, matched: [] };
  const receiptOf = new Map(taken.map((r) => [keyOf(r), r]));
  const parts = await db
    .selectFrom('sms_parts as p')
    .select(['p.recipient_id', 'p.part', 'p.smsc', 'p.operator_message_id', 'p.submitted_at'])
    .select(addressOf(sql.ref('p.recipient_id')).as('address'))
    .where(isAnyOf(dialect, 'p.operator_message_id', [...new Set(taken.map((r) => r.operator_message_id))]))
    .where(notFinal(sql.ref('p.status')))
    .execute();
  const matched = parts.flatMap(({ address, submitted_at: submittedAt, ...p }) => {
    const receipt = receiptOf.get(keyOf(p));
    const itsOwn =
      receipt &&
      !isErased(address) &&
      (receipt.recipient === null || receipt.recipient === address) &&
      (submittedAt === null || Number(receipt.at) >= Number(submittedAt) - RECEIPT_CLOCK_SKEW_MS);
    return itsOwn ? [{ ...p, status: receipt.status, error_code: receipt.error_code }] : [];
  });
  return { taken: taken.length, matched };
}

/** Receipts taken with their parts: the parts' words, then each message whose word changes (counted in `tally`). */
async function applyMatched(
  db: Db,
  dialect: DialectName,
  now: number,
  matched: Matched[],
  tally: UsageTally,
): Promise<void> {
  if (matched.length === 0) return;
  const recipientIds = [...new Set(matched.map((m) => Number(m.recipient_id)))].sort((a, b) => a - b);
  const updates = matched.map((m) => ({ recipientId: Number(m.recipient_id), part: m.part, status: m.status }));
  await queries[dialect].updateParts(db, recipientIds, updates);

  const parts = await db
    .selectFrom('sms_parts')
    .select(['recipient_id', 'status'])
    .where('recipient_id', 'in', recipientIds)
    .execute();
  const recipients = await db
    .selectFrom('send_recipients as r')
    .innerJoin('sends as s', 's.id', 'r.send_id')
    .select([
      'r.id',
      'r.status',
      'r.address',
      'r.message_id',
      'r.parts',
      'r.encoding',
      'r.send_id',
      's.account_id',
      's.webhook_url',
    ])
    .where('r.id', 'in', recipientIds)
    .execute();
  const errorOf = new Map(
    matched.filter((m) => m.status === 'Failed').map((m) => [Number(m.recipient_id), m.error_code]),
  );
  const partsOf = new Map<number, string[]>();
  for (const p of parts)
    partsOf.set(Number(p.recipient_id), [...(partsOf.get(Number(p.recipient_id)) ?? []), p.status]);
  const changed = recipients.flatMap((r) => {
    const status = messageStatus(partsOf.get(Number(r.id)) ?? []);
    const errorCode = status === 'Failed' ? (errorOf.get(Number(r.id)) ?? null) : null;
    // A Failed message stays Failed: one an SMSC refused after taking some of its parts has
    // only those recorded, and their receipts say nothing of the part refused.
    return status && status !== r.status && r.status !== 'Failed' ? [{ ...r, status, errorCode }] : [];
  });
  if (changed.length === 0) return;
  // One update for each word and error code the messages take: nearly always Delivered alone.
  const outcomes = new Map<string, Array<(typeof changed)[number]>>();
  for (const r of changed) {
    const key = JSON.stringify([r.status, r.errorCode]);
    const rows = outcomes.get(key);
    if (rows) rows.push(r);
    else outcomes.set(key, [r]);
  }
  for (const rows of outcomes.values()) {
    const { status, errorCode } = rows[0];
    await db
      .updateTable('send_recipients')
      .set({ status, error: status === 'Failed' ? UNDELIVERED : null, error_code: errorCode, updated_at: now })
      .where(
        'id',
        'in',
        rows.map((r) => r.id),
      )
      .execute();
  }
  await db
    .insertInto('recipient_history')
    .values(changed.map((r) => ({ recipient_id: r.id, status: r.status, at: now })))
    .execute();
  for (const r of changed) tally.add(r.account_id, 'sms', r.status, { parts: r.parts, encoding: r.encoding });
  // One append per send's webhook URL: the gathering outbox makes posts of them.
  await appendToStreams(
    db,
    { now: () => now },
    SMS_STATUS_TYPE,
    changed.map((r) => ({
      accountId: r.account_id,
      url: r.webhook_url,
      event: smsStatusEvent({
        queueId: r.send_id,
        messageId: r.message_id,
        recipient: r.address,
        status: r.status,
        errorCode: r.errorCode,
        error: r.status === 'Failed' ? UNDELIVERED : null,
        parts: r.parts,
        at: now,
      }),
    })),
  );
}

/**
 * Deletes up to `limit` receipts kept since before `before` that never matched a part: an
 * operator's receipt for a submit whose result was lost in a crash (its page was submitted
 * again, under new ids), or for an id Herald never had. One that matches does so within
 * seconds of its submit. Answers how many it deleted.
 */
export async function purgeUnmatchedReceipts(
  { db, dialect }: ProcedureDatabase,
  before: number,
  limit: number,
): Promise<number> {
  // No index on `at`: the table holds only receipts waiting for their part (or final ones
  // offered twice), and with this sweep no more than RETENTION_DAYS of them, so a scan of it
  // stays short.
  const stale = sql<SqlBool>`at < ${before}`;
  const result = await db
    .deleteFrom('sms_receipts')
    .where(stale)
    .where(chunkOf(dialect, 'sms_receipts', stale, limit))
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}

/** SMS's stores the retention sweep empties (messaging/retention.ts), by name. */
export const SMS_PURGES = { unmatchedReceipts: purgeUnmatchedReceipts };
