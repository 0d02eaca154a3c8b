/**
 * The SMPP transport's writes: each answered part, recorded before it stops counting toward the
 * resend bound (resend-bound.ts), and receipts, matched to the parts they report on. Procedures
 * (db/procedure.ts), so on SQLite they run on the database's thread: this module stays clear of
 * the `smpp` package.
 */
import { sql, type Kysely, type SqlBool } from 'kysely';
import type { DialectName } from '../../../db/dialect.ts';
import { chunkOf } from '../../../db/chunks.ts';
import { procedure, type ProcedureDatabase } from '../../../db/procedure.ts';
import type { Schema } from '../../../db/schema.ts';
import { isAnyOf } from '../../../db/in-json.ts';
import { erasedAddress, isErased } from '../../../messaging/erased-identifiers.ts';
import { queries, unrecordedAnswer } from '../../queries.ts';
import { applyReceipts, matchWaiting, type Receipt } from '../../receipts.ts';
import type { DeliveryReceipt } from './receipt-pdu.ts';

type Db = Kysely<Schema>;

/** A part the SMSC took. */
export interface Answer {
  sendId: string;
  recipient: string;
  /** From 1. */
  part: number;
  parts: number;
  operatorMessageId: string;
  /** The connection that took it. */
  smsc: string;
}

export const recordSmppAnswers = procedure(
  import.meta.url,
  'recordSmppAnswers',
  async ({ db }, args: { now: number; answers: Answer[] }): Promise<void> => {
    await db
      .insertInto('smpp_submits')
      // One row a part, the last given: PostgreSQL refuses an upsert that touches a row twice.
      .values(
        [...new Map(args.answers.map((a) => [`${a.sendId}\n${a.recipient}\n${a.part}`, a])).values()].map((a) => ({
          send_id: a.sendId,
          recipient: a.recipient,
          part: a.part,
          parts: a.parts,
          operator_message_id: a.operatorMessageId,
          at: args.now,
          smsc: a.smsc,
        })),
      )
      .onConflict((oc) =>
        oc.columns(['send_id', 'recipient', 'part']).doUpdateSet((eb) => ({
          parts: eb.ref('excluded.parts'),
          operator_message_id: eb.ref('excluded.operator_message_id'),
          at: eb.ref('excluded.at'),
          smsc: eb.ref('excluded.smsc'),
        })),
      )
      .execute();
  },
);

/**
 * Parts of these messages an SMSC answered in an earlier try, whose outcome was not recorded
 * then, whichever connection took them: looked up by their key (send, recipient), a message at a
 * time. Asked as two lists (`send_id in … and recipient in …`), PostgreSQL hashed both and
 * scanned the whole table, every answer of the running batch, for every page: 4 ms a page and
 * growing.
 */
export async function answeredBefore(
  db: Db,
  dialect: DialectName,
  messages: Array<{ sendId: string; recipient: string }>,
): Promise<Array<Answer & { at: number }>> {
  if (messages.length === 0) return [];
  const keys = messages.map(({ sendId, recipient }) => ({ sendId, recipient }));
  const { rows } = await sql<AnswerRow>`select s.send_id, s.recipient, s.part, s.parts, s.operator_message_id, s.smsc,
                                               s.at
                                          from ${queries[dialect].messageKeyRows(keys)}
                                          join smpp_submits s on s.send_id = m.send_id
                                                             and s.recipient = m.recipient`.execute(db);
  return rows.map((row) => ({
    sendId: row.send_id,
    recipient: row.recipient,
    part: Number(row.part),
    parts: Number(row.parts),
    operatorMessageId: row.operator_message_id,
    smsc: row.smsc,
    at: Number(row.at),
  }));
}

interface AnswerRow {
  send_id: string;
  recipient: string;
  part: number;
  parts: number;
  operator_message_id: string;
  smsc: string;
  at: number | string;
}

/** A receipt with the connection it came over. */
export type ConnectionReceipt = DeliveryReceipt & { smsc: string };

/**
 * Receipts, of one connection or several, in one transaction: each matched to the part it
 * reports on by its id under each reading together with its recipient, among the parts its
 * connection took — those whose outcome is not yet recorded (smpp_submits), then recorded ones
 * (sms_parts) — and applied (receipts.ts), to a part of that recipient only. One that matches
 * nothing yet waits in sms_receipts under each reading, for a part recorded later (another
 * process's submit, just answered): under the id as written whatever its number, under another
 * reading for its number only; answers how many those were, per connection.
 *
 * An erased person's part, answered or recorded, knows their number only as its hash (made
 * with `erasureKey`): a receipt for it is matched by the hash of its number, and kept under the
 * hash, never the number, so their number does not wait in sms_receipts in clear.
 */
export const applySmppReceipts = procedure(
  import.meta.url,
  'applySmppReceipts',
  async (
    { db, dialect },
    args: { now: number; receipts: ConnectionReceipt[]; erasureKey?: Uint8Array },
  ): Promise<Record<string, number>> => {
    const { waiting, unmatched } = await db.transaction().execute(async (trx) => {
      const known = new Set<string>();
      const key = (smsc: string, recipient: string, id: string) => `${smsc}\n${recipient}\n${id}`;
      const readings = [...new Set(args.receipts.flatMap((r) => r.readings))];
      const pending = await trx
        .selectFrom('smpp_submits')
        .select(['smsc', 'recipient', 'operator_message_id'])
        .where(isAnyOf(dialect, 'operator_message_id', readings))
        .execute();
      for (const row of pending) known.add(key(row.smsc, row.recipient, row.operator_message_id));
      let erased = pending.some((row) => isErased(row.recipient));
      const isKnown = (r: ConnectionReceipt) => r.readings.some((id) => known.has(key(r.smsc, r.recipient, id)));
      const notPending = args.receipts.filter((r) => !isKnown(r));
      if (notPending.length > 0) {
        const recorded = await trx
          .selectFrom('sms_parts as p')
          .innerJoin('send_recipients as r', 'r.id', 'p.recipient_id')
          .select(['p.smsc', 'r.address', 'p.operator_message_id'])
          .where(isAnyOf(dialect, 'p.operator_message_id', [...new Set(notPending.flatMap((r) => r.readings))]))
          .execute();
        for (const row of recorded) known.add(key(row.smsc, row.address, row.operator_message_id));
        erased ||= recorded.some((row) => isErased(row.address));
      }
      const erasureKey = erased && args.erasureKey ? Buffer.from(args.erasureKey) : undefined;
      const unmatched: Record<string, number> = {};
      const receipts: Receipt[] = args.receipts.flatMap((r) => {
        const { smsc, state, errorCode, recipient } = r;
        const id = r.readings.find((reading) => known.has(key(smsc, recipient, reading)));
        if (id !== undefined) return [{ smsc, operatorMessageId: id, state, errorCode, recipient }];
        if (erasureKey) {
          const hash = erasedAddress(erasureKey, recipient);
          const ofErased = r.readings.find((reading) => known.has(key(smsc, hash, reading)));
          if (ofErased !== undefined) return [{ smsc, operatorMessageId: ofErased, state, errorCode, recipient: hash }];
        }
        // Matched later by the id as written alone: the SMSC may write the number otherwise than
        // Herald keeps it. Another reading of the id is another id of the same SMSC's (hex 64 is
        // 100), very likely another person's message: it matches a part of this number only.
        unmatched[smsc] = (unmatched[smsc] ?? 0) + 1;
        return r.readings.map((reading, i) => ({
          smsc,
          operatorMessageId: reading,
          state,
          errorCode,
          ...(i === 0 ? {} : { recipient }),
        }));
      });
      return { waiting: await applyReceipts(trx, dialect, { now: () => args.now }, { receipts }), unmatched };
    });
    await matchWaiting(db, dialect, args.now, waiting);
    return unmatched;
  },
);

/**
 * Deletes up to `limit` answered parts whose message's outcome is recorded (its recipient is no
 * longer Queued): they are kept only to spare a resend. `before` does not apply: such a row is
 * done with whatever its age, and one whose message is still Queued is needed whatever its age.
 */
export async function purgeRecordedAnswers(
  { db, dialect }: ProcedureDatabase,
  _before: number,
  limit: number,
): Promise<number> {
  const done = sql<SqlBool>`not ${unrecordedAnswer}`;
  const result = await db
    .deleteFrom('smpp_submits')
    .where(done)
    .where(chunkOf(dialect, 'smpp_submits', done, limit))
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}

/** The SMPP transport's stores the retention sweep empties (messaging/retention.ts), by name. */
export const SMPP_PURGES = { recordedSmppAnswers: purgeRecordedAnswers };
