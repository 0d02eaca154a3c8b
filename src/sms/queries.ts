import { sql, type Kysely, type RawBuilder, type SqlBool } from 'kysely';
import type { DialectName } from '../db/dialect.ts';
import type { Schema } from '../db/schema.ts';
import { ERASED_REASON } from '../messaging/erased-identifiers.ts';
import { leftOut, withoutRecipients } from '../messaging/recipients.ts';

/**
 * The SMS statements that differ by database. Rows travel as ONE JSON parameter of objects
 * unpacked in SQL (as crm/queries.ts explains), each field read by its name.
 *
 * SQLite unpacks them with jsonb_each, whose rows come as JSONB: each `->> 'name'` reads a
 * field without parsing the row's text again. A 500-message page's three writes
 * (updateRecipients, two parts a message) took a median of 18 to 25 ms from jsonb_each over
 * objects, 30 to 42 ms from json_each over the positional arrays they replaced, and 49 to
 * 64 ms from json_each over objects (SQLite 3.53 in memory, 101 interleaved runs each, three
 * times, on a shared 2-core machine).
 */

type Db = Kysely<Schema>;

/**
 * One message's outcome: its status the last it reached (Submitted, or further with the
 * receipts given with the answer), and its parts as the operator took them.
 */
export interface Outcome {
  id: number;
  status: string;
  messageId: string;
  parts: number;
  encoding: string;
  error: string | null;
  errorCode: string | null;
  recipient: string;
  /** The operator's id of each part, in order. */
  operatorMessageIds: string[];
  /**
   * Each part's number, where they are not 1, 2, …: the parts an SMSC took of a message it
   * then refused (SubmitResult's `taken`).
   */
  partNumbers?: number[];
  /** Each part's status, in the same order. */
  partStatuses: string[];
  /** The connection that took each part, in the same order. */
  smsc: string[];
  /** The connection that took its last part, shown as the message's; null for none. */
  connection: string | null;
  /** Parts × its route's price per part at submit, in micro-units of `currency`; null for no price. */
  priceMicros: number | null;
  currency: string | null;
  /** Characters smart encoding replaced in its text. */
  replacedCharacters: number;
  /** When it was submitted (epoch ms), kept with its parts: a receipt kept from before then is not its own. */
  submittedAt: number;
}

/** A status a message went through: its history and its events. */
export interface Step {
  recipientId: number;
  status: string;
}

/** A receipt's word for one part of a message. */
export interface PartUpdate {
  recipientId: number;
  part: number;
  status: string;
}

/** A part the sandbox keeps (transports/sandbox.ts); `text` sealed when `sealed`. */
export interface SandboxPart {
  accountId: string;
  sendId: string;
  messageId: string;
  recipient: string;
  sender: string;
  part: number;
  parts: number;
  encoding: string;
  text: string;
  sealed: boolean;
  /** A code Herald made (Verify): the account's sandbox read opens it. */
  opens: boolean;
}

/** A message the SMPP journal looks up by its key. */
export interface MessageKey {
  sendId: string;
  recipient: string;
}

/**
 * Whether a part at `current` takes `next`: an intermediate receipt (Processed) never undoes a
 * final one. SMSCs send ENROUTE and DELIVRD on their own connections, and the two can arrive,
 * or be applied, in either order.
 */
export function stillOpen(current: RawBuilder<unknown>, next: RawBuilder<unknown>): RawBuilder<SqlBool> {
  return sql<SqlBool>`(${next} <> 'Processed' or ${notFinal(current)})`;
}

/** Whether a part's status is not final yet: neither Delivered nor Failed. */
export function notFinal(status: RawBuilder<unknown>): RawBuilder<SqlBool> {
  return sql<SqlBool>`${status} not in ('Delivered', 'Failed')`;
}

/** An smpp_submits row whose message's outcome is not yet recorded: its recipient is still Queued. */
export const unrecordedAnswer = sql<SqlBool>`exists (
  select 1 from send_recipients r
   where r.send_id = smpp_submits.send_id and r.address = smpp_submits.recipient and r.status = 'Queued')`;

/** `{n, n, …}`: ids as one PostgreSQL array parameter. */
const idArray = (ids: readonly number[]) => `{${ids.join(',')}}`;

const SQLITE = {
  /** Whether a sender name is numeric, in the form of sender_names_numeric's condition, so the index serves it. */
  numericName: sql<SqlBool>`name not glob '*[^0-9]*'`,

  /** The sender name of a send `s`'s content. */
  senderName: sql<string>`s.content ->> '$.senderName'`,

  /**
   * A page's outcomes, their history and their parts, but for recipients an erasure ended
   * since the page was read (ERASED_REASON): answers their ids, whose outcomes it left.
   */
  async updateRecipients(db: Db, now: number, outcomes: Outcome[], steps: Step[]): Promise<Set<number>> {
    const updated = await sql<{ id: number }>`update send_recipients
                 set status = v.value ->> 'status', message_id = v.value ->> 'messageId',
                     parts = v.value ->> 'parts', encoding = v.value ->> 'encoding',
                     error = v.value ->> 'error', error_code = v.value ->> 'errorCode', updated_at = ${now},
                     smsc = v.value ->> 'connection', price_micros = v.value ->> 'priceMicros',
                     currency = v.value ->> 'currency', replaced_characters = v.value ->> 'replacedCharacters'
                from jsonb_each(${JSON.stringify(outcomes)}) v
               where send_recipients.id = v.value ->> 'id' and send_recipients.status = 'Queued'
                 and send_recipients.reason is not ${ERASED_REASON}
           returning send_recipients.id`.execute(db);
    const left = leftOut(outcomes, updated.rows);
    const written = withoutRecipients(outcomes, left, ({ id }) => id);
    const history = withoutRecipients(steps, left, ({ recipientId }) => recipientId);
    await sql`insert into recipient_history (recipient_id, status, at)
              select value ->> 'recipientId', value ->> 'status', ${now}
                from jsonb_each(${JSON.stringify(history)})`.execute(db);
    await sql`insert into sms_parts (recipient_id, part, operator_message_id, status, smsc, submitted_at)
              select o.value ->> 'id', coalesce(o.value -> 'partNumbers' ->> p.key, p.key + 1), p.value,
                     o.value -> 'partStatuses' ->> p.key,
                     o.value -> 'smsc' ->> p.key, o.value ->> 'submittedAt'
                from jsonb_each(${JSON.stringify(written)}) o, json_each(o.value -> 'operatorMessageIds') p`.execute(
      db,
    );
    return left;
  },

  /** Receipts' words for parts, in the caller's transaction; `recipientIds`: the parts' recipients, in id order. */
  async updateParts(db: Db, _recipientIds: number[], updates: PartUpdate[]): Promise<void> {
    await sql`update sms_parts set status = v.value ->> 'status' from jsonb_each(${JSON.stringify(updates)}) v
               where sms_parts.recipient_id = v.value ->> 'recipientId' and sms_parts.part = v.value ->> 'part'
                 and ${stillOpen(sql.ref('sms_parts.status'), sql`v.value ->> 'status'`)}`.execute(db);
  },

  async insertSandboxParts(db: Db, now: number, parts: SandboxPart[]): Promise<void> {
    await sql`insert into sandbox_sms (account_id, send_id, message_id, recipient, sender, part, parts, encoding, text,
                                       sealed, opens, created_at)
              select value ->> 'accountId', value ->> 'sendId', value ->> 'messageId', value ->> 'recipient',
                     value ->> 'sender', value ->> 'part', value ->> 'parts', value ->> 'encoding', value ->> 'text',
                     value ->> 'sealed', value ->> 'opens', ${now}
                from jsonb_each(${JSON.stringify(parts)})`.execute(db);
  },

  /** The keys as rows `m` with columns `send_id` and `recipient`. */
  messageKeyRows: (keys: MessageKey[]) =>
    sql`(select value ->> 'sendId' as send_id, value ->> 'recipient' as recipient
           from jsonb_each(${JSON.stringify(keys)})) as m`,
};

const POSTGRES: typeof SQLITE = {
  numericName: sql<SqlBool>`name ~ '^[0-9]+$'`,

  senderName: sql<string>`s.content::json ->> 'senderName'`,

  // One statement on PostgreSQL, where each round trip is a wait for another process. The
  // recipients are found by `id = any(…)`: joined to the outcomes alone, whose count the
  // planner cannot see (it assumes 100), it scanned the whole table while it was small, or
  // its statistics said so, and a page's update took a millisecond and growing.
  async updateRecipients(db, now, outcomes, steps) {
    const { rows } = await sql<{ id: string }>`
              with outcome as (select v from jsonb_array_elements(${JSON.stringify(outcomes)}::jsonb) v),
                   updated as (update send_recipients r
                                  set status = v ->> 'status', message_id = v ->> 'messageId',
                                      parts = (v ->> 'parts')::int, encoding = v ->> 'encoding',
                                      error = v ->> 'error', error_code = v ->> 'errorCode',
                                      updated_at = ${now}::bigint, smsc = v ->> 'connection',
                                      price_micros = (v ->> 'priceMicros')::bigint, currency = v ->> 'currency',
                                      replaced_characters = (v ->> 'replacedCharacters')::int
                                 from outcome
                                where r.id = any(${idArray(outcomes.map(({ id }) => id))}::bigint[])
                                  and r.id = (v ->> 'id')::bigint and r.status = 'Queued'
                                  and r.reason is distinct from ${ERASED_REASON}
                                returning r.id),
                   history as (insert into recipient_history (recipient_id, status, at)
                               select (h ->> 'recipientId')::bigint, h ->> 'status', ${now}::bigint
                                 from jsonb_array_elements(${JSON.stringify(steps)}::jsonb) h
                                where (h ->> 'recipientId')::bigint in (select id from updated)),
                   parts as (insert into sms_parts (recipient_id, part, operator_message_id, status, smsc, submitted_at)
                             select (v ->> 'id')::bigint,
                                    coalesce(((v -> 'partNumbers') ->> (p.n - 1)::int)::int, p.n), p.id,
                                    (v -> 'partStatuses') ->> (p.n - 1)::int,
                                    (v -> 'smsc') ->> (p.n - 1)::int, (v ->> 'submittedAt')::bigint
                               from outcome join updated u on u.id = (v ->> 'id')::bigint,
                                    jsonb_array_elements_text(v -> 'operatorMessageIds') with ordinality p(id, n))
              select v ->> 'id' as id from outcome where (v ->> 'id')::bigint not in (select id from updated)`.execute(
      db,
    );
    return new Set(rows.map((row) => Number(row.id)));
  },

  // Receipts for two parts of one message, applied side by side, would each read the other
  // part as it was and neither would end the message: its row, locked first (in id order,
  // so two such transactions never wait for each other both), takes them in turn. The parts
  // are found by `= any(…)`, as updateRecipients finds its rows: a join alone let the planner
  // scan the table.
  async updateParts(db, recipientIds, updates) {
    const ids = idArray(recipientIds);
    await sql`select id from send_recipients where id = any(${ids}::bigint[]) order by id for update`.execute(db);
    await sql`update sms_parts p set status = v ->> 'status'
                from jsonb_array_elements(${JSON.stringify(updates)}::jsonb) v
               where p.recipient_id = any(${ids}::bigint[])
                 and p.recipient_id = (v ->> 'recipientId')::bigint and p.part = (v ->> 'part')::int
                 and ${stillOpen(sql.ref('p.status'), sql`v ->> 'status'`)}`.execute(db);
  },

  async insertSandboxParts(db, now, parts) {
    await sql`insert into sandbox_sms (account_id, send_id, message_id, recipient, sender, part, parts, encoding, text,
                                       sealed, opens, created_at)
              select r ->> 'accountId', r ->> 'sendId', r ->> 'messageId', r ->> 'recipient', r ->> 'sender',
                     (r ->> 'part')::int, (r ->> 'parts')::int, r ->> 'encoding', r ->> 'text',
                     (r ->> 'sealed')::boolean, (r ->> 'opens')::boolean, ${now}::bigint
                from jsonb_array_elements(${JSON.stringify(parts)}::jsonb) r`.execute(db);
  },

  // Two arrays, not JSON: the planner counts an array's elements (unnest's support function)
  // but takes any JSON to hold 100, and for 100 keys it hashed smpp_submits whole rather than
  // look each key up in its primary key: 4 ms a page at 20,000 rows, 0.6 ms looked up.
  messageKeyRows: (keys) =>
    sql`unnest(${keys.map((key) => key.sendId)}::text[], ${keys.map((key) => key.recipient)}::text[])
          as m(send_id, recipient)`,
};

export const queries: Record<DialectName, typeof SQLITE> = { sqlite: SQLITE, postgres: POSTGRES };
