import { sql, type RawBuilder } from 'kysely';
import type { DialectName } from '../db/dialect.ts';

/** What links are made for: the account's send, leading to `url`. */
export interface LinkTarget {
  accountId: string;
  sendId: string;
  url: string;
  now: number;
}

/** A link to write: its code, and its recipient's id (null: shared by the send's recipients). */
export interface NewLink {
  code: string;
  recipientId: number | null;
}

type Codes = RawBuilder<{ code: string }>;
type RecipientCodes = RawBuilder<{ recipient_id: number | string; code: string }>;

// SQLite needs a WHERE on an INSERT … SELECT before ON CONFLICT (its parser's ambiguity).
const SQLITE = {
  insertLinks: ({ accountId, sendId, url, now }: LinkTarget, links: string): Codes => sql`
    insert into links (code, account_id, send_id, recipient_id, url, created_at)
    select value ->> 'code', ${accountId}, ${sendId}, value ->> 'recipientId', ${url}, ${now}
      from jsonb_each(${links}) where true
    on conflict (code) do nothing returning code`,
  recipientCodes: ({ sendId, url }: LinkTarget, recipientIds: number[]): RecipientCodes => sql`
    select recipient_id, code from links
     where recipient_id in (select value from json_each(${JSON.stringify(recipientIds)}))
       and send_id = ${sendId} and url = ${url}
     order by created_at desc`,
};

const POSTGRES: typeof SQLITE = {
  insertLinks: ({ accountId, sendId, url, now }, links) => sql`
    insert into links (code, account_id, send_id, recipient_id, url, created_at)
    select v ->> 'code', ${accountId}, ${sendId}, (v ->> 'recipientId')::bigint, ${url}, ${now}::bigint
      from jsonb_array_elements(${links}::jsonb) v
    on conflict (code) do nothing returning code`,
  recipientCodes: ({ sendId, url }, recipientIds) => sql`
    select recipient_id, code from links
     where recipient_id = any(${`{${recipientIds.join(',')}}`}::bigint[]) and send_id = ${sendId} and url = ${url}
     order by created_at desc`,
};

/** The links module's statements that differ by database, as JSON parameters unpacked in SQL. */
export const queries: Record<DialectName, typeof SQLITE> = { sqlite: SQLITE, postgres: POSTGRES };
