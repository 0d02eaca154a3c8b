import { randomUUID } from 'node:crypto';
import { PostgresAdapter, sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;

  // Lists and properties: names unique per account case-insensitively (name_key is the
  // lower-cased name). Exactly one list per account is its `All contacts`, which is every
  // contact of the account by definition: it has no rows in list_members (a million
  // contacts would otherwise cost a million rows saying only that they exist).
  await db.schema
    .createTable('contact_lists')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('name_key', 'text', (c) => c.notNull())
    .addColumn('is_default', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addUniqueConstraint('contact_lists_name', ['account_id', 'name_key'])
    .execute();
  await db.schema
    .createIndex('contact_lists_default')
    .on('contact_lists')
    .column('account_id')
    .unique()
    .where(sql.ref('is_default'), '=', sql.lit(true))
    .execute();

  await db.schema
    .createTable('contact_properties')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('name_key', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addUniqueConstraint('contact_properties_name', ['account_id', 'name_key'])
    .execute();

  // contactId is one numeric space across accounts (src/crm/README.md). On SQLite an
  // INTEGER PRIMARY KEY is the rowid itself, the cheapest key there is; PostgreSQL needs
  // BIGINT. Ids are handed out by contact_ids (below), never by the key's own default,
  // because a client may also create a contact under an id of its choosing.
  // `mobile` is the E.164 number as digits (country code + national number): the value
  // matched and searched; `mobile_country_code` only splits it back for reading.
  // `properties` is a JSON object {propertyid: value}: a contact's properties are read and
  // written whole, so one column costs one row write where a table would cost one a property.
  await db.schema
    .createTable('contacts')
    .addColumn('id', postgres ? 'bigint' : 'integer', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('email', 'text')
    .addColumn('mobile', 'text')
    .addColumn('mobile_country_code', 'text')
    .addColumn('mobile_opt_in', 'boolean', (c) => c.notNull())
    .addColumn('email_opt_in', 'boolean', (c) => c.notNull())
    .addColumn('properties', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  // The matching rules (SPEC §4 rule 4) look records up by mobile or by email, and read the
  // other column from the row they fetch anyway; each index also serves GET /contacts?mobile=
  // or ?email=. Without the third column the indexes are a third smaller: at a million
  // contacts the plain upsert of bench/contacts.ts went from 16,600 to 21,600 rows/s on SQLite.
  // account_id leads so that SQLite's planner seeks here rather than in contacts_account.
  await db.schema.createIndex('contacts_mobile').on('contacts').columns(['account_id', 'mobile']).execute();
  await db.schema.createIndex('contacts_email').on('contacts').columns(['account_id', 'email']).execute();
  // `All contacts`, a page at a time in id order.
  await db.schema.createIndex('contacts_account').on('contacts').columns(['account_id', 'id']).execute();

  if (postgres) {
    await sql`create sequence contact_ids as bigint`.execute(db);
  } else {
    await db.schema
      .createTable('contact_ids')
      .addColumn('one', 'integer', (c) => c.primaryKey().check(sql`one = 1`))
      .addColumn('last_value', 'integer', (c) => c.notNull())
      .execute();
    await sql`insert into contact_ids (one, last_value) values (1, 0)`.execute(db);
  }

  // Membership of the lists an account creates; `All contacts` has none (above).
  await db.schema
    .createTable('list_members')
    .addColumn('list_id', 'text', (c) => c.notNull().references('contact_lists.id').onDelete('cascade'))
    .addColumn('contact_id', 'bigint', (c) => c.notNull().references('contacts.id').onDelete('cascade'))
    .addColumn('added_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('list_members_pkey', ['list_id', 'contact_id'])
    .execute();
  await db.schema.createIndex('list_members_contact').on('list_members').column('contact_id').execute();

  await db.schema
    .createTable('contact_batches')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('list_id', 'text', (c) => c.notNull().references('contact_lists.id').onDelete('cascade'))
    .addColumn('webhook_url', 'text')
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('contact_count', 'integer', (c) => c.notNull())
    // JSON arrays of contact ids, set when the batch is applied.
    .addColumn('inserted_ids', 'text')
    .addColumn('updated_ids', 'text')
    .addColumn('skipped_ids', 'text')
    .addColumn('error', 'text')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('started_at', 'bigint')
    .addColumn('completed_at', 'bigint')
    .addCheckConstraint('contact_batches_status', sql`status in ('Queued', 'Processing', 'Completed', 'Failed')`)
    .execute();

  // Accounts created before this migration get their `All contacts` list now.
  const accounts = await sql<{ id: string }>`select id from accounts`.execute(db);
  const now = Date.now();
  for (const { id } of accounts.rows) {
    await sql`insert into contact_lists (id, account_id, name, name_key, is_default, created_at)
              values (${randomUUID()}, ${id}, 'All contacts', 'all contacts', ${sql.lit(true)}, ${now})`.execute(db);
  }
}
