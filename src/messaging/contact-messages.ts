import type { Kysely } from 'kysely';
import type { Schema } from '../db/schema.ts';
import { notFound } from '../errors.ts';
import { cursorCodec } from '../http/cursor.ts';
import { recipientWord } from './send.ts';

const cursor = cursorCodec(['integer']);

/**
 * `GET /contacts/{contactId}/messages`: what the account sent a contact, by SMS and email,
 * newest first, a page at a time — each message with its send and status word. Recipients
 * carry the contact they were matched to when their send was expanded (recipients.ts), and
 * the send_recipients_contact index (0025) walks them newest first.
 */
export async function contactMessages(db: Kysely<Schema>, accountId: string, contactId: number, page: { limit: number; cursor?: string }) {
  const contact = await db.selectFrom('contacts').select('id').where('account_id', '=', accountId).where('id', '=', contactId).executeTakeFirst();
  if (!contact) throw notFound('The contact');
  let select = db
    .selectFrom('send_recipients as r')
    .innerJoin('sends as s', 's.id', 'r.send_id')
    .select(['r.id', 's.channel', 's.id as send_id', 's.status as send_status', 'r.message_id', 'r.address', 'r.status', 'r.reason', 'r.updated_at'])
    .where('r.contact_id', '=', contactId)
    .where('s.account_id', '=', accountId);
  if (page.cursor !== undefined) select = select.where('r.id', '<', cursor.decode(page.cursor)[0]);
  const rows = await select.orderBy('r.id', 'desc').limit(page.limit + 1).execute();
  const { rows: shown, nextCursor } = cursor.page(rows, page.limit, (last) => [Number(last.id)]);
  return {
    messages: shown.map((row) => ({
      channel: row.channel,
      sendId: row.send_id,
      messageId: row.message_id,
      address: row.address,
      status: recipientWord({ status: row.send_status }, row.status),
      reason: row.reason,
      updatedAt: new Date(Number(row.updated_at)).toISOString(),
    })),
    nextCursor,
  };
}
