/**
 * Messages from handsets (MO), whatever transport brought them: routed to an account, stored,
 * STOP and START applied, and posted to the account's inboundSmsWebhookUrl, in one
 * transaction. A procedure (db/procedure.ts): on SQLite it runs on the database's thread.
 */
import { sql, type Kysely, type SqlBool } from 'kysely';
import { chunkOf } from '../db/chunks.ts';
import type { Clock } from '../clock.ts';
import type { Database } from '../db/database.ts';
import type { DialectName } from '../db/dialect.ts';
import { procedure, type ProcedureDatabase } from '../db/procedure.ts';
import type { Schema } from '../db/schema.ts';
import { lockAccountContacts } from '../crm/queries.ts';
import { addSuppression } from '../messaging/suppressions.ts';
import { appendToStreams } from '../webhooks/events.ts';
import { queries } from './queries.ts';
import type { InboundSms } from './transport.ts';

type Db = Kysely<Schema>;

export const SMS_INBOUND_TYPE = 'sms.inbound';

/** The suppression a STOP reply makes, and the only one a START lifts. */
export const STOP_REASON = 'STOP reply';

/** The usual opt-out and opt-in words (as carriers and Twilio take them): the whole message, any case. */
const STOP_WORDS = new Set(['STOP', 'STOPALL', 'UNSUBSCRIBE', 'CANCEL', 'END', 'QUIT']);
const START_WORDS = new Set(['START', 'UNSTOP', 'YES']);

export interface InboundOutcome {
  accountId: string;
  contactId: number | null;
  /** What the message did to the number's standing with the account. */
  keyword: 'stop' | 'start' | null;
}

/** A number as SMSCs write it (+44…, 0044… stays as given) in the E.164 digits Herald keeps. */
const digits = (address: string) => address.trim().replace(/^\+/, '');

/** The handset's rows from a name among which the last sent is looked for. */
const RECENT_SENDS = 20;

/**
 * The account an MO belongs to: the one holding its destination as a numeric sender name
 * (unique across accounts), else the one that last sent to the handset from that name; the
 * service's default name (`sharedName`), which every account sends from, is never one account's
 * even if one registered it before it became the default (senders/names.ts refuses it). The
 * second reads the handset's recipient rows newest first (send_recipients_handset), the
 * RECENT_SENDS newest sent from that name, and takes the one whose parts were submitted last:
 * a handful of rows, never the sends.
 */
async function routeOf(
  db: Db,
  dialect: DialectName,
  mo: { from: string; to: string; sharedName: string },
): Promise<string | undefined> {
  const { from, to } = mo;
  const owner =
    to === mo.sharedName
      ? undefined
      : await db
          .selectFrom('sender_names')
          .select('account_id')
          .where('name', '=', to)
          .where(queries[dialect].numericName)
          .executeTakeFirst();
  if (owner) return owner.account_id;
  // The handset's newest rows from that name, by id: the order of their accepts. A campaign
  // accepted early may go out late, so the last sent is the one submitted last among them.
  const recent = db
    .selectFrom('send_recipients as r')
    .innerJoin('sends as s', 's.id', 'r.send_id')
    .select(['s.account_id', 'r.id'])
    .select((eb) =>
      eb
        .selectFrom('sms_parts as p')
        .select((p) => p.fn.max('p.submitted_at').as('at'))
        .whereRef('p.recipient_id', '=', 'r.id')
        .as('submitted_at'),
    )
    .where('r.address', '=', from)
    .where('s.channel', '=', 'sms')
    .where('r.status', 'not in', ['Queued', 'Cancelled', 'NotSent'])
    .where(sql<SqlBool>`${queries[dialect].senderName} = ${to}`)
    .orderBy('r.id', 'desc')
    .limit(RECENT_SENDS);
  const last = await db
    .selectFrom(recent.as('recent'))
    .select('account_id')
    .orderBy(sql`coalesce(submitted_at, 0)`, 'desc')
    .orderBy('id', 'desc')
    .limit(1)
    .executeTakeFirst();
  return last?.account_id;
}

/**
 * The word a reply is, read through what an SMSC or a handset adds around it: a NUL an SMSC
 * counted in (U+FFFD once decoded), invisible marks, full-width letters.
 */
const keywordOf = (text: string): InboundOutcome['keyword'] => {
  const word = text
    .normalize('NFKC')
    .replace(/[\p{Cc}\p{Cf}\uFFFD]/gu, ' ')
    .trim()
    .toUpperCase();
  return STOP_WORDS.has(word) ? 'stop' : START_WORDS.has(word) ? 'start' : null;
};

/**
 * Routes, stores and posts one MO; null when it routes to no account (nothing is kept).
 * `onlyAccountId`: an MO that would go to another account is not received either (the
 * sandbox's simulated ones, which an account makes).
 *
 * STOP (or another opt-out word) suppresses the number for the account, whether or not a
 * contact holds it, and sets mobileOptIn false on every contact with it. START (UNSTOP, YES)
 * undoes a STOP: it lifts that suppression (one added by hand or for another reason stays)
 * and sets mobileOptIn true on those contacts again, since the handset asked for the
 * messages; with no STOP to undo it changes nothing, so a YES answering a question is only
 * a message.
 */
export const storeInboundSms = procedure(
  import.meta.url,
  'storeInboundSms',
  async ({ db, dialect }, args: InboundSms & { now: number } & InboundOptions): Promise<InboundOutcome | null> =>
    db.transaction().execute(async (trx) => {
      const from = digits(args.from);
      const to = /^\+?\d+$/.test(args.to.trim()) ? digits(args.to) : args.to;
      const accountId = await routeOf(trx, dialect, { from, to, sharedName: args.defaultSenderName });
      if (accountId === undefined || (args.onlyAccountId !== undefined && accountId !== args.onlyAccountId))
        return null;
      const contact = await trx
        .selectFrom('contacts')
        .select('id')
        .where('account_id', '=', accountId)
        .where('mobile', '=', from)
        .orderBy('updated_at', 'desc')
        .orderBy('id', 'desc')
        .limit(1)
        .executeTakeFirst();
      const contactId = contact ? Number(contact.id) : null;
      await trx
        .insertInto('sms_inbound')
        .values({
          account_id: accountId,
          sender: from,
          destination: to,
          text: args.text,
          contact_id: contactId,
          received_at: args.at,
        })
        .execute();

      let keyword = keywordOf(args.text);
      // A contact batch being applied holds the account's contacts (crm/apply.ts) and writes
      // back every opt-in it read: the STOP or START waits for it, not the other way round.
      if (keyword !== null) await lockAccountContacts(trx, dialect, accountId);
      const optIn = (value: boolean) =>
        trx
          .updateTable('contacts')
          .set({ mobile_opt_in: value, updated_at: args.now })
          .where('account_id', '=', accountId)
          .where('mobile', '=', from)
          .execute();
      if (keyword === 'stop') {
        await addSuppression(trx, { accountId, channel: 'sms', address: from, reason: STOP_REASON, now: args.now });
        await optIn(false);
      } else if (keyword === 'start') {
        const lifted = await trx
          .deleteFrom('suppressions')
          .where('account_id', '=', accountId)
          .where('channel', '=', 'sms')
          .where('address', '=', from)
          .where('reason', '=', STOP_REASON)
          .executeTakeFirst();
        if (Number(lifted.numDeletedRows) > 0) await optIn(true);
        else keyword = null;
      }

      const account = await trx
        .selectFrom('accounts')
        .select('inbound_sms_webhook_url')
        .where('id', '=', accountId)
        .executeTakeFirstOrThrow();
      const event = { from, to, text: args.text, at: new Date(args.at).toISOString(), contactId };
      await appendToStreams(trx, { now: () => args.now }, SMS_INBOUND_TYPE, [
        { accountId, url: account.inbound_sms_webhook_url, event },
      ]);
      return { accountId, contactId, keyword };
    }),
);

/** How an MO is routed: `DEFAULT_SENDER_NAME`, and the one account it may reach, if any (storeInboundSms). */
interface InboundOptions {
  defaultSenderName: string;
  onlyAccountId?: string;
}

/** Receives one MO (see storeInboundSms). */
export function receiveInboundSms(
  database: Database,
  clock: Clock,
  mo: InboundSms,
  options: InboundOptions,
): Promise<InboundOutcome | null> {
  return database.call(storeInboundSms, { ...mo, now: clock.now(), ...options });
}

/**
 * Deletes up to `limit` messages from handsets received before `before` (RETENTION_DAYS): an
 * MO is its text, kept like a sent message's body. No index on the time alone: replies are
 * few beside what is sent, and an account's are indexed by time already.
 */
export async function purgeInboundSms(
  { db, dialect }: ProcedureDatabase,
  before: number,
  limit: number,
): Promise<number> {
  const old = sql<SqlBool>`received_at < ${before}`;
  const result = await db
    .deleteFrom('sms_inbound')
    .where(old)
    .where(chunkOf(dialect, 'sms_inbound', old, limit))
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}

/** The inbound store the retention sweep empties (messaging/retention.ts), by name. */
export const INBOUND_PURGES = { inboundSms: purgeInboundSms };
