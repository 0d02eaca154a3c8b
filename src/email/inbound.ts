import type { Kysely } from 'kysely';
import { procedure } from '../db/procedure.ts';
import type { DialectName } from '../db/dialect.ts';
import type { Schema } from '../db/schema.ts';
import { isErased } from '../messaging/erased-identifiers.ts';
import { addSuppression, optOutEmail } from '../messaging/suppressions.ts';
import type { EmailEventWord } from './events.ts';
import { queries } from './queries.ts';
import type { TokenRecipient } from './tracking.ts';
import { appendEmailEvent } from './record.ts';

/**
 * What mail received after sending reports of a message, recorded on it: an asynchronous
 * bounce (a DSN) or a spam complaint (an ARF report). A procedure (db/procedure.ts), apart from
 * the parsing (mail-reports.ts), whose libraries the database thread need not load.
 */

type Db = Kysely<Schema>;

/**
 * The message a report is about: the recipient row its VERP return path names (a signed token,
 * so trusted), else the one whose Message-ID carries this uuid (derived from its send's random
 * id, so known only to those who hold the message or the send: messaging/message-ids.ts).
 * Either names one account's message: the account is the row's, never the report's say.
 */
export interface ReportedMessage {
  recipient: TokenRecipient | null;
  messageUuid: string | null;
}

export type ReportedEvent =
  | { kind: 'bounce'; hard: boolean; reply: string }
  | { kind: 'complaint'; feedbackType: string };

/** What a report came to: recorded (or recorded before: `repeated`), or why not. */
export type ReportOutcome =
  | {
      recorded: Extract<EmailEventWord, 'Bounce' | 'Spam Report'>;
      repeated: boolean;
      accountId: string;
      batchId: string;
      messageId: string;
      email: string;
    }
  | { refused: 'unknown message' | 'not sent' | 'in flight' | 'erased' };

/** Statuses of a message the next hop took or is still trying (the answer to a later bounce). */
const BOUNCEABLE = ['Delivered', 'Deferred'];

/** The suppression reason of a complaint. */
export const SPAM_REPORT_REASON = 'spam report';

/**
 * The row of the message a report names, locked (PostgreSQL) for the rest of its transaction:
 * two copies of one report at once (a sender retrying) wait for each other, so the second
 * sees the first's record; SQLite runs one write transaction at a time. By Message-ID through
 * send_recipients_message_id (0022).
 */
export function reportedRowQuery(trx: Db, dialect: DialectName, message: ReportedMessage) {
  let select = trx
    .selectFrom('send_recipients as r')
    .innerJoin('sends as s', 's.id', 'r.send_id')
    .select(['r.id', 'r.address', 'r.status', 'r.message_id', 's.id as send_id', 's.account_id', 's.webhook_url'])
    .where('s.channel', '=', 'email');
  if (message.recipient !== null)
    select = select.where('r.id', '=', message.recipient.recipientId).where('r.send_id', '=', message.recipient.sendId);
  else if (message.messageUuid !== null) select = select.where('r.message_id', '=', message.messageUuid);
  else return undefined;
  return queries[dialect].lockReportedRow(select);
}

/**
 * Records a report on its message, in one transaction, once: a second copy of it (the same
 * DSN or ARF report delivered twice) answers `repeated` and writes nothing.
 *
 * A bounce makes the recipient's status Bounce even after Delivered (the next hop took it,
 * then could not deliver it), with the reply in its history; a hard one suppresses the address
 * (ARCHITECTURE.md: 5.1.x). A complaint adds Spam Report to its history, and opts the address
 * out of the account's email as an unsubscribe does. Each posts its event.
 */
export const recordMailReport = procedure(
  import.meta.url,
  'recordMailReport',
  async (
    { db, dialect },
    args: { message: ReportedMessage; event: ReportedEvent; now: number },
  ): Promise<ReportOutcome> =>
    db.transaction().execute(async (trx) => {
      const row = await reportedRowQuery(trx, dialect, args.message)?.executeTakeFirst();
      if (!row) return { refused: 'unknown message' };
      // The person was erased: nothing names them again (they stay suppressed by their hash).
      if (isErased(row.address)) return { refused: 'erased' };
      // Handed over and not yet recorded (a relay may bounce within the page's flight): the
      // sender is asked to try again, when the page's record has written the message's id.
      if (row.message_id === null) return { refused: row.status === 'Queued' ? 'in flight' : 'not sent' };
      const { event, now } = args;
      const word = event.kind === 'bounce' ? 'Bounce' : 'Spam Report';
      const outcome = {
        recorded: word,
        accountId: row.account_id,
        batchId: row.send_id,
        messageId: row.message_id,
        email: row.address,
      } as const;
      let reason: string;
      let reply: string | null = null;
      if (event.kind === 'bounce') {
        if (row.status === 'Bounce') return { ...outcome, repeated: true };
        if (!BOUNCEABLE.includes(row.status)) return { refused: 'not sent' };
        reply = event.reply;
        reason = `${event.hard ? 'hard' : 'soft'} bounce, reported after delivery`;
        await trx
          .updateTable('send_recipients')
          .set({ status: 'Bounce', error: reply, retry_at: null, updated_at: now })
          .where('id', '=', row.id)
          .execute();
        if (event.hard)
          await addSuppression(trx, {
            accountId: row.account_id,
            channel: 'email',
            address: row.address,
            reason: `hard bounce: ${reply}`,
            now,
          });
      } else {
        // Every report opts the address out (the account may have lifted an earlier one since);
        // the message's Spam Report is recorded and posted once.
        await optOutEmail(trx, dialect, {
          accountId: row.account_id,
          address: row.address,
          reason: SPAM_REPORT_REASON,
          now,
        });
        const before = await trx
          .selectFrom('recipient_history')
          .select('at')
          .where('recipient_id', '=', row.id)
          .where('status', '=', word)
          .executeTakeFirst();
        if (before) return { ...outcome, repeated: true };
        reason = `feedback type ${event.feedbackType}`;
      }
      await appendEmailEvent(trx, dialect, row, { event: word, reason, reply, at: now });
      return { ...outcome, repeated: false };
    }),
);
