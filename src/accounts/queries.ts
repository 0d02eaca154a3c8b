import { sql, type Kysely, type RawBuilder, type Selectable } from 'kysely';
import { dialectOf } from '../db/dialect.ts';
import type { AccountsTable, Schema } from '../db/schema.ts';

/** The account statements that differ by database. */

const SQLITE = {
  deleteAccount: (id: string): RawBuilder<{ id: string }> => sql`delete from accounts where id = ${id} returning id`,
  // A write transaction (BEGIN IMMEDIATE) already holds every row against other writers.
  lockAccountRow: (id: string): RawBuilder<Selectable<AccountsTable>> => sql`select * from accounts where id = ${id}`,
};

const POSTGRES: typeof SQLITE = {
  // The rows written per message have no foreign keys on PostgreSQL (migration 0026), so no
  // cascade takes them: they go in the same statement.
  deleteAccount: (id) => sql`
    with account_sends as (select id from sends where account_id = ${id}),
         recipients as (delete from send_recipients where send_id in (select id from account_sends) returning id),
         history as (delete from recipient_history where recipient_id in (select id from recipients)),
         parts as (delete from sms_parts where recipient_id in (select id from recipients)),
         sandbox_sms as (delete from sandbox_sms where account_id = ${id}),
         sandbox_email as (delete from sandbox_email where account_id = ${id})
    delete from accounts where id = ${id} returning id`,
  lockAccountRow: (id) => sql`select * from accounts where id = ${id} for update`,
};

const STATEMENTS = { sqlite: SQLITE, postgres: POSTGRES };

/** Deletes the account and everything it owns in one statement; answers whether it was there. */
export async function deleteAccountRows(db: Kysely<Schema>, id: string): Promise<boolean> {
  const { rows } = await STATEMENTS[dialectOf(db)].deleteAccount(id).execute(db);
  return rows.length > 0;
}

/** The account's row, held against other writers until the caller's transaction ends. */
export async function lockAccountRow(trx: Kysely<Schema>, id: string): Promise<Selectable<AccountsTable> | undefined> {
  const { rows } = await STATEMENTS[dialectOf(trx)].lockAccountRow(id).execute(trx);
  return rows[0];
}
