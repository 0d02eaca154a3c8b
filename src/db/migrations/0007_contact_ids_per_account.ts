import { PostgresAdapter, sql, type Kysely } from 'kysely';

/**
 * contactId becomes per account: the key of a contact is (account_id, id), and each account
 * numbers its own contacts from a counter row of its own. With one numeric space across
 * accounts, an account could take an id before another did, and a 422-versus-202 told
 * anyone whether an id existed elsewhere.
 *
 * Existing ids are unique across accounts, so they stay as they are. Every account's counter
 * starts where the one shared counter stood: every id Herald handed out lies at or below it,
 * and an id a client chose above it is passed over when reached (src/crm/queries.ts).
 *
 * list_members loses its foreign key to contacts: a member's contact is (the list's
 * account, contact_id), which a key on contact_id alone cannot name, and a composite key
 * would store the account's id in every membership row. Memberships still go with their
 * list (and so with their account); no route deletes a single contact.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  if (db.getExecutor().adapter instanceof PostgresAdapter) await postgres(db);
  else await sqlite(db);
}

async function postgres(db: Kysely<unknown>): Promise<void> {
  await sql`alter table list_members drop constraint list_members_contact_id_fkey`.execute(db);
  await sql`alter table contacts drop constraint contacts_pkey`.execute(db);
  await sql`drop index contacts_account`.execute(db);
  await sql`alter table contacts add constraint contacts_pkey primary key (account_id, id)`.execute(db);
  await createCounters(db);
  await sql`insert into contact_id_counters (account_id, last_value)
            select a.id, case when s.is_called then s.last_value else 0 end
              from accounts a cross join contact_ids s`.execute(db);
  await sql`drop sequence contact_ids`.execute(db);
}

// SQLite cannot change a table's key in place: both tables are rebuilt, list_members first,
// so that no foreign key points at contacts when it is dropped (a dropped parent would
// cascade its implicit DELETE into the memberships).
async function sqlite(db: Kysely<unknown>): Promise<void> {
  await sql`create table list_members_new (
              list_id text not null references contact_lists (id) on delete cascade,
              contact_id integer not null,
              added_at bigint not null,
              constraint list_members_pkey primary key (list_id, contact_id))`.execute(db);
  await sql`insert into list_members_new select list_id, contact_id, added_at from list_members`.execute(db);
  await sql`drop table list_members`.execute(db);
  await sql`alter table list_members_new rename to list_members`.execute(db);
  await sql`create index list_members_contact on list_members (contact_id)`.execute(db);

  await sql`create table contacts_new (
              id integer not null,
              account_id text not null references accounts (id) on delete cascade,
              email text,
              mobile text,
              mobile_country_code text,
              mobile_opt_in boolean not null,
              email_opt_in boolean not null,
              properties text not null,
              created_at bigint not null,
              updated_at bigint not null,
              constraint contacts_pkey primary key (account_id, id))`.execute(db);
  await sql`insert into contacts_new
            select id, account_id, email, mobile, mobile_country_code, mobile_opt_in, email_opt_in, properties,
                   created_at, updated_at
              from contacts`.execute(db);
  await sql`drop table contacts`.execute(db);
  await sql`alter table contacts_new rename to contacts`.execute(db);
  await sql`create index contacts_mobile on contacts (account_id, mobile)`.execute(db);
  await sql`create index contacts_email on contacts (account_id, email)`.execute(db);

  await createCounters(db);
  await sql`insert into contact_id_counters (account_id, last_value)
            select a.id, s.last_value from accounts a cross join contact_ids s`.execute(db);
  await sql`drop table contact_ids`.execute(db);
}

async function createCounters(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('contact_id_counters')
    .addColumn('account_id', 'text', (c) => c.primaryKey().references('accounts.id').onDelete('cascade'))
    .addColumn('last_value', 'bigint', (c) => c.notNull())
    .execute();
}
