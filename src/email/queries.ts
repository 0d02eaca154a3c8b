import { sql, type Kysely } from 'kysely';
import type { DialectName } from '../db/dialect.ts';
import type { Schema } from '../db/schema.ts';
import { leftOut, withoutRecipients } from '../messaging/recipients.ts';

/**
 * The email statements that differ by database. Rows travel as ONE JSON parameter of objects
 * unpacked in SQL (as crm/queries.ts explains), each field read by its name; on SQLite
 * by jsonb_each (sms/queries.ts says why).
 */

type Db = Kysely<Schema>;

/** One message's outcome, as a page's record writes it to its recipient row. */
export interface Outcome {
  id: number;
  status: string;
  messageId: string;
  /** The last SMTP reply. */
  reply: string;
  attempts: number;
  /** When it is tried again. */
  retryAt: number | null;
  /** When it was first refused for now. */
  deferredAt: number | null;
}

/** One event of one message, in order: its history. */
export interface Step {
  recipientId: number;
  status: string;
  /** The SMTP reply, or null. */
  reply: string | null;
}

/** An address that bounced hard, with the reason it is suppressed. */
export interface Suppressed {
  recipientId: number;
  address: string;
  reason: string;
}

/** What a page's record writes, each list in JSON. */
export interface RecipientWrites {
  accountId: string;
  now: number;
  outcomes: Outcome[];
  steps: Step[];
  suppress: Suppressed[];
}

/** A message the sandbox keeps (transports/sandbox.ts). */
export interface SandboxEmail {
  accountId: string;
  sendId: string;
  messageId: string;
  recipient: string;
  raw: string;
  /** A Verify code: `raw` is sealed, and the account's sandbox read opens it. */
  opens: boolean;
}

/** A row lock's clause, for a select of `send_recipients as r`. */
interface Lockable<Q> {
  forUpdate(of: 'r'): Q;
}

const SQLITE = {
  /**
   * A page's outcomes, their history and their suppressions, but for recipients no longer
   * waiting to be sent (Queued or Deferred) since the page was read: an erasure ended them
   * (Dropped, ERASED_REASON), or a bounce report came for a retry in flight. Answers their ids, whose
   * outcomes it left.
   */
  async updateRecipients(db: Db, w: RecipientWrites): Promise<Set<number>> {
    const { now, accountId } = w;
    const { rows } = await sql<{ id: number }>`update send_recipients
                 set status = v.value ->> 'status', message_id = v.value ->> 'messageId', error = v.value ->> 'reply',
                     attempts = v.value ->> 'attempts', retry_at = v.value ->> 'retryAt',
                     deferred_at = v.value ->> 'deferredAt', updated_at = ${now}
                from jsonb_each(${JSON.stringify(w.outcomes)}) v
               where send_recipients.id = v.value ->> 'id' and send_recipients.status in ('Queued', 'Deferred')
           returning send_recipients.id`.execute(db);
    const left = leftOut(w.outcomes, rows);
    const steps = withoutRecipients(w.steps, left, ({ recipientId }) => recipientId);
    const suppress = withoutRecipients(w.suppress, left, ({ recipientId }) => recipientId);
    await sql`insert into recipient_history (recipient_id, status, at, reply)
              select value ->> 'recipientId', value ->> 'status', ${now}, value ->> 'reply'
                from jsonb_each(${JSON.stringify(steps)})`.execute(db);
    if (suppress.length > 0) {
      await sql`insert into suppressions (account_id, channel, address, reason, created_at)
                select ${accountId}, 'email', value ->> 'address', value ->> 'reason', ${now}
                  from jsonb_each(${JSON.stringify(suppress)}) where true
                on conflict (account_id, channel, address) do nothing`.execute(db);
    }
    return left;
  },

  async insertSandboxEmail(db: Db, now: number, messages: SandboxEmail[]): Promise<void> {
    await sql`insert into sandbox_email (account_id, send_id, message_id, recipient, raw, opens, created_at)
              select value ->> 'accountId', value ->> 'sendId', value ->> 'messageId', value ->> 'recipient',
                     value ->> 'raw', value ->> 'opens', ${now}
                from jsonb_each(${JSON.stringify(messages)})`.execute(db);
  },

  /** SQLite runs one write transaction at a time: the row needs no lock. */
  lockReportedRow: <Q extends Lockable<Q>>(select: Q): Q => select,
};

const POSTGRES: typeof SQLITE = {
  // One statement on PostgreSQL, the recipients found by `id = any(…)` (see sms/queries.ts).
  async updateRecipients(db, w) {
    const { now, accountId } = w;
    const ids = `{${w.outcomes.map(({ id }) => id).join(',')}}`;
    const { rows } = await sql<{ id: string }>`
              with outcome as (select v from jsonb_array_elements(${JSON.stringify(w.outcomes)}::jsonb) v),
                   updated as (update send_recipients r
                                  set status = v ->> 'status', message_id = v ->> 'messageId', error = v ->> 'reply',
                                      attempts = (v ->> 'attempts')::int, retry_at = (v ->> 'retryAt')::bigint,
                                      deferred_at = (v ->> 'deferredAt')::bigint, updated_at = ${now}::bigint
                                 from outcome
                                where r.id = any(${ids}::bigint[]) and r.id = (v ->> 'id')::bigint
                                  and r.status in ('Queued', 'Deferred')
                                returning r.id),
                   suppressed as (insert into suppressions (account_id, channel, address, reason, created_at)
                                  select ${accountId}, 'email', s ->> 'address', s ->> 'reason', ${now}::bigint
                                    from jsonb_array_elements(${JSON.stringify(w.suppress)}::jsonb) s
                                   where (s ->> 'recipientId')::bigint in (select id from updated)
                                  on conflict (account_id, channel, address) do nothing),
                   history as (insert into recipient_history (recipient_id, status, at, reply)
                               select (h ->> 'recipientId')::bigint, h ->> 'status', ${now}::bigint, h ->> 'reply'
                                 from jsonb_array_elements(${JSON.stringify(w.steps)}::jsonb) h
                                where (h ->> 'recipientId')::bigint in (select id from updated))
              select v ->> 'id' as id from outcome where (v ->> 'id')::bigint not in (select id from updated)`.execute(
      db,
    );
    return new Set(rows.map((row) => Number(row.id)));
  },

  async insertSandboxEmail(db, now, messages) {
    await sql`insert into sandbox_email (account_id, send_id, message_id, recipient, raw, opens, created_at)
              select r ->> 'accountId', r ->> 'sendId', r ->> 'messageId', r ->> 'recipient', r ->> 'raw',
                     (r ->> 'opens')::boolean, ${now}::bigint
                from jsonb_array_elements(${JSON.stringify(messages)}::jsonb) r`.execute(db);
  },

  /**
   * Two copies of one report at once (a sender retrying) wait for each other, so the second
   * sees the first's record.
   */
  lockReportedRow: (select) => select.forUpdate('r'),
};

export const queries: Record<DialectName, typeof SQLITE> = { sqlite: SQLITE, postgres: POSTGRES };
