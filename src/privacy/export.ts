import type { Kysely, Selectable } from 'kysely';
import { contactsHolding, type ContactView } from '../crm/contacts.ts';
import { emailContentView } from '../email/read.ts';
import type { DialectName } from '../db/dialect.ts';
import type { Schema } from '../db/schema.ts';
import type { EmailSendContent } from '../email/accept.ts';
import { badRequest } from '../errors.ts';
import { cursorCodec } from '../http/cursor.ts';
import { contentState, dueAtOf, readHistory, recipientWord, type ContentState } from '../messaging/reads.ts';
import type { Channel } from '../messaging/recipients.ts';
import { listSuppressions } from '../messaging/suppressions.ts';
import type { StoredSmsContent } from '../sms/accept.ts';
import { verificationView } from '../verify/record.ts';
import { personOf, type Identifier, type Person } from './person.ts';
import { queries } from './queries.ts';

/**
 * `GET /privacy/export` (ARCHITECTURE.md, "Data rights and management"; docs/privacy.md,
 * "Export"): everything the account holds about a person, for a subject access request.
 */

type Db = Kysely<Schema>;
type RecipientRow = Selectable<Schema['send_recipients']>;
type SendRow = Selectable<Schema['sends']>;

/** Messages a page: SMS first, then email (ARCHITECTURE.md). */
export const EXPORT_PAGE_SIZE = 1000;

/** [channel's phase: 0 SMS, 1 email; the last recipient id shown of it]. */
const pageCursor = cursorCodec(['integer', 'integer']);
const PHASES: readonly Channel[] = ['sms', 'email'];
const CURSOR_PROBLEM = { field: 'cursor', message: 'must be a nextCursor from a previous page' };

/**
 * The account's recipients of a channel at these addresses, after a recipient id, in id order.
 * One seek of the recipients' (address, id) index (send_recipients_handset, 0017) per address,
 * then a sort of the person's recipients after the cursor: no scan of the messages held, and no
 * index more for every fan-out to write.
 */
async function recipientsAt(
  db: Db,
  dialect: DialectName,
  q: { accountId: string; channel: Channel; addresses: string[]; after: number; limit: number },
): Promise<RecipientRow[]> {
  if (q.addresses.length === 0) return [];
  const { rows } = await queries[dialect].recipientsAt(db, q);
  return rows;
}

/** The messages of a page, SMS then email, and the cursor of the next (null: the last page). */
async function messagesPage(
  db: Db,
  dialect: DialectName,
  q: { accountId: string; person: Person; cursor?: string; limit: number },
) {
  const [phase, after] = q.cursor === undefined ? [0, 0] : pageCursor.decode(q.cursor);
  if (phase >= PHASES.length) throw badRequest('The cursor is not one this API gave out.', [CURSOR_PROBLEM]);
  const shown: Record<Channel, RecipientRow[]> = { sms: [], email: [] };
  let room = q.limit;
  for (let i = phase; i < PHASES.length; i++) {
    const channel = PHASES[i];
    const from = i === phase ? after : 0;
    const addresses = channel === 'sms' ? q.person.mobiles : q.person.emails;
    // One row past the room left tells whether this channel goes on past the page.
    const rows = await recipientsAt(db, dialect, {
      accountId: q.accountId,
      channel,
      addresses,
      after: from,
      limit: room + 1,
    });
    shown[channel] = rows.slice(0, room);
    if (rows.length > room) {
      const last = shown[channel].at(-1);
      return { shown, nextCursor: pageCursor.encode([i, last === undefined ? from : Number(last.id)]) };
    }
    room -= shown[channel].length;
  }
  return { shown, nextCursor: null };
}

const iso = (ms: number) => new Date(Number(ms)).toISOString();

/**
 * The tags that filled a recipient's text when its send's content is shown (sealed ones never
 * are): a single request's own (sends.content, its one recipient's), under the recipient's row's.
 */
function tagsOf(
  row: RecipientRow,
  shown: ContentState,
  sealedTags: boolean,
  sendTags: Record<string, string> = {},
): Record<string, string> | null {
  if (shown !== 'available' || sealedTags) return null;
  return { ...sendTags, ...(row.tags === null ? {} : (JSON.parse(row.tags) as Record<string, string>)) };
}

/**
 * The page's messages as the sends' reads show their recipients (sms/read.ts, email/read.ts),
 * each with its send's id, times and content, and its history.
 */
async function messageViews(db: Db, accountId: string, shown: Record<Channel, RecipientRow[]>) {
  const rows = [...shown.sms, ...shown.email];
  if (rows.length === 0) return { sms: [], email: [] };
  const ids = rows.map((row) => Number(row.id));
  const [sends, recorded] = await Promise.all([
    db
      .selectFrom('sends')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('id', 'in', [...new Set(rows.map((row) => row.send_id))])
      .execute(),
    db.selectFrom('recipient_history').selectAll().where('recipient_id', 'in', ids).orderBy('at').execute(),
  ]);
  const sendOf = new Map(sends.map((send) => [send.id, send]));
  const recordedOf = Map.groupBy(recorded, (h) => Number(h.recipient_id));
  const read = (row: RecipientRow, channel: Channel) => {
    const send = sendOf.get(row.send_id) as SendRow;
    const id = Number(row.id);
    const history = readHistory(send, channel, [{ id, status: row.status }], recordedOf.get(id) ?? []).get(id) ?? [];
    const status = recipientWord(send, row.status, row.due_at);
    const scheduledAt = send.scheduled_at === null ? null : iso(send.scheduled_at);
    return {
      send,
      history,
      common: {
        messageId: row.message_id,
        status,
        reason: row.reason,
        dueAt: dueAtOf({ status, due_at: row.due_at }, scheduledAt),
        createdAt: iso(send.created_at),
        updatedAt: iso(row.updated_at),
      },
    };
  };
  return {
    sms: shown.sms.map((row) => {
      const { send, history, common } = read(row, 'sms');
      const stored = JSON.parse(send.content) as StoredSmsContent;
      const state = contentState(send, 'sealed' in stored);
      return {
        queueId: send.id,
        recipient: row.address,
        ...common,
        parts: row.parts,
        encoding: row.encoding,
        error: row.error,
        errorCode: row.error_code,
        contentState: state,
        content:
          state === 'available' && 'body' in stored
            ? { senderName: stored.senderName, body: stored.body }
            : { senderName: null, body: null },
        tags: tagsOf(row, state, 'sealed' in stored, 'tags' in stored ? stored.tags : undefined),
        history: history.map((h) => ({ status: h.status, at: iso(h.at) })),
      };
    }),
    email: shown.email.map((row) => {
      const { send, history, common } = read(row, 'email');
      const stored = JSON.parse(send.content) as EmailSendContent;
      const state = contentState(send, false);
      return {
        batchId: send.id,
        email: row.address,
        ...common,
        contentState: state,
        content: emailContentView(stored, state),
        tags: tagsOf(row, state, stored.passcode === true),
        history: history.map((h) => ({
          event: h.status,
          at: iso(h.at),
          ...(h.url === null ? {} : { url: h.url }),
          ...(h.reply === null ? {} : { reply: h.reply }),
          ...(h.machine === null ? {} : { machine: Boolean(h.machine) }),
        })),
      };
    }),
  };
}

/**
 * The clicks on the links made for the page's messages (links.recipient_id, links_recipient;
 * then link_clicks_code), oldest first, all of them: the reads' cap (links/clicks.ts) is for a
 * send's page, not a subject access request. A link the send's recipients share names no one.
 */
async function clicksOf(db: Db, accountId: string, shown: Record<Channel, RecipientRow[]>) {
  const messages = new Map<number, { channel: Channel; messageId: string | null }>();
  for (const channel of PHASES) {
    for (const row of shown[channel]) messages.set(Number(row.id), { channel, messageId: row.message_id });
  }
  if (messages.size === 0) return [];
  const rows = await db
    .selectFrom('links as l')
    .innerJoin('link_clicks as c', 'c.code', 'l.code')
    .select(['l.recipient_id', 'l.url', 'c.at', 'c.user_agent'])
    .where('l.account_id', '=', accountId)
    .where('l.recipient_id', 'in', [...messages.keys()])
    .orderBy('c.at')
    .orderBy('c.id')
    .execute();
  return rows.map((row) => ({
    ...(messages.get(Number(row.recipient_id)) as { channel: Channel; messageId: string | null }),
    url: row.url,
    at: iso(row.at),
    userAgent: row.user_agent,
  }));
}

/** What the first page alone carries: the person's contacts, their lists, suppressions, replies and verifications. */
async function aboutPerson(db: Db, accountId: string, person: Person, now: number) {
  const contacts: ContactView[] = await contactsHolding(db, accountId, person);
  const listIds = [...new Set(contacts.flatMap((contact) => contact.listIds))];
  const lists =
    listIds.length === 0
      ? []
      : await db
          .selectFrom('contact_lists')
          .select(['id as listId', 'name'])
          .where('account_id', '=', accountId)
          .where('id', 'in', listIds)
          .orderBy('created_at')
          .orderBy('id')
          .execute();
  const suppressed = (channel: Channel, addresses: string[]) =>
    Promise.all(
      addresses.map(async (address) =>
        (await listSuppressions(db, accountId, channel, { address, limit: 1 })).suppressions.map((s) => ({
          channel,
          ...s,
        })),
      ),
    );
  const suppressions = [
    ...(await suppressed('sms', person.mobiles)),
    ...(await suppressed('email', person.emails)),
  ].flat();
  // Replies from their handsets, on sms_inbound_sender (account_id, sender, received_at).
  const inbound =
    person.mobiles.length === 0
      ? []
      : await db
          .selectFrom('sms_inbound')
          .select(['sender', 'destination', 'text', 'contact_id', 'received_at'])
          .where('account_id', '=', accountId)
          .where('sender', 'in', person.mobiles)
          .orderBy('received_at')
          .orderBy('id')
          .execute();
  // Verify's codes to their numbers and addresses, on verifications_recipient (account_id, recipient, …).
  const verifications = await db
    .selectFrom('verifications')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('recipient', 'in', [...person.mobiles, ...person.emails])
    .orderBy('created_at')
    .orderBy('id')
    .execute();
  return {
    contacts,
    lists,
    suppressions,
    verifications: verifications.map((row) => verificationView(row, now)),
    inbound: inbound.map((row) => ({
      from: row.sender,
      to: row.destination,
      text: row.text,
      at: iso(row.received_at),
      contactId: row.contact_id === null ? null : Number(row.contact_id),
    })),
  };
}

/**
 * A page of the export: the first (no cursor) carries the person's contacts, lists,
 * suppressions, inbound replies and verifications, later ones empty arrays for them; every page carries up to
 * `limit` messages, SMS then email, and the clicks of those messages. Another account's person
 * is no one here: every read is the account's alone.
 */
export async function exportPerson(
  db: Db,
  dialect: DialectName,
  q: { accountId: string; given: Identifier; now: number; cursor?: string; limit?: number },
) {
  const person = await personOf(db, q.accountId, q.given);
  const { shown, nextCursor } = await messagesPage(db, dialect, {
    accountId: q.accountId,
    person,
    cursor: q.cursor,
    limit: q.limit ?? EXPORT_PAGE_SIZE,
  });
  const about =
    q.cursor === undefined
      ? await aboutPerson(db, q.accountId, person, q.now)
      : { contacts: [], lists: [], suppressions: [], inbound: [], verifications: [] };
  const messages = await messageViews(db, q.accountId, shown);
  return {
    contacts: about.contacts,
    lists: about.lists,
    sms: messages.sms,
    email: messages.email,
    clicks: await clicksOf(db, q.accountId, shown),
    suppressions: about.suppressions,
    inbound: about.inbound,
    verifications: about.verifications,
    nextCursor,
  };
}
