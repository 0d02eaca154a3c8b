import { PostgresAdapter, sql, type Kysely } from 'kysely';

/**
 * Lists can be deleted now (DELETE /lists/{listId}), and a contact batch's record must outlive
 * the list it added to: its client may still read its result by batchId. contact_batches.list_id
 * loses its foreign key, which would have deleted the records with the list. A list named by a
 * batch still queued is not deleted (messaging/deletions.ts), and that check reads the queued
 * batches of a list by contact_batches_queued_list: a partial index, as small as the queue.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  if (db.getExecutor().adapter instanceof PostgresAdapter) {
    await sql`alter table contact_batches drop constraint contact_batches_list_id_fkey`.execute(db);
  } else {
    await sqlite(db);
  }
  await db.schema
    .createIndex('contact_batches_queued_list')
    .on('contact_batches')
    .column('list_id')
    .where(sql.ref('status'), '=', 'Queued')
    .execute();
}

// SQLite cannot drop a foreign key in place: the table is rebuilt (nothing references it).
async function sqlite(db: Kysely<unknown>): Promise<void> {
  await sql`create table contact_batches_new (
              id text primary key,
              account_id text not null references accounts (id) on delete cascade,
              list_id text not null,
              webhook_url text,
              status text not null,
              contact_count integer not null,
              inserted_ids text,
              updated_ids text,
              skipped_ids text,
              error text,
              created_at bigint not null,
              started_at bigint,
              completed_at bigint,
              constraint contact_batches_status
                check (status in ('Queued', 'Processing', 'Completed', 'Failed')))`.execute(db);
  await sql`insert into contact_batches_new
            select id, account_id, list_id, webhook_url, status, contact_count, inserted_ids, updated_ids,
                   skipped_ids, error, created_at, started_at, completed_at
              from contact_batches`.execute(db);
  await sql`drop table contact_batches`.execute(db);
  await sql`alter table contact_batches_new rename to contact_batches`.execute(db);
}
