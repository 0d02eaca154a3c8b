import { sql, type Kysely, type QueryResult, type Selectable } from 'kysely';
import type { DialectName } from '../db/dialect.ts';
import type { Schema } from '../db/schema.ts';

/** The privacy statements that differ by database. */

type Db = Kysely<Schema>;
type RecipientRow = Selectable<Schema['send_recipients']>;

/** Whose recipients: an account's, of a channel, at these addresses, after a recipient id; `limit` of them. */
export interface RecipientsAt {
  accountId: string;
  channel: 'sms' | 'email';
  addresses: string[];
  after: number;
  limit: number;
}

const SQLITE = {
  // As messaging/queries.ts's recipientsToSends: with no statistics SQLite's planner would walk
  // the account's sends and look the addresses up in each; CROSS JOIN keeps the recipients, found
  // by address on send_recipients_handset (address, then the rowid, the id), the outer loop.
  recipientsAt: (db: Db, q: RecipientsAt): Promise<QueryResult<RecipientRow>> =>
    sql<RecipientRow>`
      select r.* from send_recipients r cross join sends s on s.id = r.send_id
       where r.address in (${sql.join(q.addresses)}) and r.id > ${q.after}
         and s.account_id = ${q.accountId} and s.channel = ${q.channel}
       order by r.id
       limit ${q.limit}`.execute(db),
};

const POSTGRES: typeof SQLITE = {
  // Its planner weighs the join from statistics; send_recipients_handset is (address, id).
  recipientsAt: (db, q) =>
    sql<RecipientRow>`
      select r.* from send_recipients r join sends s on s.id = r.send_id
       where r.address in (${sql.join(q.addresses)}) and r.id > ${q.after}
         and s.account_id = ${q.accountId} and s.channel = ${q.channel}
       order by r.id
       limit ${q.limit}`.execute(db),
};

export const queries: Record<DialectName, typeof SQLITE> = { sqlite: SQLITE, postgres: POSTGRES };
