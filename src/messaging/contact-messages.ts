import { sql, type Kysely } from 'kysely';
import type { DialectName } from '../db/dialect.ts';
import type { Schema } from '../db/schema.ts';
import { notFound } from '../errors.ts';
import { cursorCodec } from '../http/cursor.ts';
import { queries } from './queries.ts';
import { recipientWord } from './reads.ts';

const cursor = cursorCodec(['integer']);

/**
 * `GET /contacts/{contactId}/messages`: what the account sent a contact's number and address,
 * by SMS and email, newest first, a page at a time. Found by address, on the recipients'
 * (address, id) index that replies from handsets already keep (0017), so no fan-out writes an
 * index more for it (one by contact id cost SMS batches a sixth of their speed): what went to
 * the contact's number and address as they are now.
 */
export async function contactMessages(
  db: Kysely<Schema>,
  dialect: DialectName,
  q: { accountId: string; contactId: number; limit: number; cursor?: string },
) {
  const contact = await db
    .selectFrom('contacts')
    .select(['email', 'mobile'])
    .where('account_id', '=', q.accountId)
    .where('id', '=', q.contactId)
    .executeTakeFirst();
  if (!contact) throw notFound('The contact');
  const addresses = [contact.mobile, contact.email].filter((address) => address !== null);
  if (addresses.length === 0) return { messages: [], nextCursor: null };
  const { rows } = await sql<{
    id: number;
    channel: 'sms' | 'email';
    send_id: string;
    send_status: string;
    created_at: number;
    message_id: string | null;
    address: string;
    status: string;
    reason: string | null;
    due_at: number | null;
    updated_at: number;
  }>`
    select r.id, s.channel, s.id as send_id, s.status as send_status, s.created_at, r.message_id, r.address, r.status,
           r.reason, r.due_at, r.updated_at
      from send_recipients r ${queries[dialect].recipientsToSends} sends s on s.id = r.send_id
     where r.address in (${sql.join(addresses)}) and s.account_id = ${q.accountId}
       ${q.cursor === undefined ? sql`` : sql`and r.id < ${cursor.decode(q.cursor)[0]}`}
     order by r.id desc
     limit ${q.limit + 1}`.execute(db);
  const { rows: shown, nextCursor } = cursor.page(rows, q.limit, (last) => [Number(last.id)]);
  return {
    messages: shown.map((row) => ({
      channel: row.channel,
      sendId: row.send_id,
      messageId: row.message_id,
      address: row.address,
      status: recipientWord({ status: row.send_status }, row.status, row.due_at),
      reason: row.reason,
      sentAt: new Date(Number(row.created_at)).toISOString(),
      updatedAt: new Date(Number(row.updated_at)).toISOString(),
    })),
    nextCursor,
  };
}
