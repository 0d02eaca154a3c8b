import { sql } from 'kysely';
import type { Database } from '../src/db/database.ts';
import type { ContactsTable } from '../src/db/schema.ts';

/** A contact's columns that differ by channel: its address, its consent, its properties. */
export type ContactFields = Pick<
  ContactsTable,
  'email' | 'mobile' | 'mobile_country_code' | 'mobile_opt_in' | 'email_opt_in' | 'properties'
>;

/** A mobile number, opted in to SMS: an SMS bench's contact. */
export const mobileContact = (mobile: string): ContactFields => ({
  email: null,
  mobile,
  mobile_country_code: '91',
  mobile_opt_in: true,
  email_opt_in: false,
  properties: '{}',
});

/**
 * A list of contacts 1 to `count`, written straight into the database in transactions of 2,000
 * (what a bench measures is sending to them), `fields` giving each contact's channel columns.
 * Answers the list's id.
 */
export async function seedList(
  database: Database,
  accountId: string,
  count: number,
  fields: (n: number) => ContactFields,
): Promise<string> {
  const listId = crypto.randomUUID();
  await database.db
    .insertInto('contact_lists')
    .values({
      id: listId,
      account_id: accountId,
      name: 'Customers',
      name_key: 'customers',
      is_default: false,
      created_at: Date.now(),
    })
    .execute();
  for (let start = 0; start < count; start += 2000) {
    const ids = Array.from({ length: Math.min(2000, count - start) }, (_, i) => start + i + 1);
    await database.db.transaction().execute(async (trx) => {
      await trx
        .insertInto('contacts')
        .values(ids.map((n) => ({ id: n, account_id: accountId, ...fields(n), created_at: n, updated_at: n })))
        .execute();
      await trx
        .insertInto('list_members')
        .values(ids.map((n) => ({ list_id: listId, contact_id: n, added_at: n })))
        .execute();
    });
  }
  return listId;
}

/** The numbers 1..n as rows of a column `g`, for seeding by SQL. */
export function series(database: Database, n: number) {
  return database.dialect === 'postgres'
    ? sql`generate_series(1, ${sql.lit(n)}) as s(g)`
    : sql`(with recursive s(g) as (select 1 union all select g + 1 from s where g < ${sql.lit(n)})
           select g from s) as s`;
}
