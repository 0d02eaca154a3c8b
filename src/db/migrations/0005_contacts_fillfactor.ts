import { PostgresAdapter, sql, type Kysely } from 'kysely';

/**
 * PostgreSQL: contacts' pages are filled to 80 %, not 100 %. A contact is updated far more
 * often than its email or mobile changes (opt-ins, properties, every batch that sends it
 * again); with room left on its page, such an update is a heap-only tuple update that
 * writes no entry into any of the table's four indexes. SQLite updates rows in place and
 * has no such setting.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  if (db.getExecutor().adapter instanceof PostgresAdapter) await sql`alter table contacts set (fillfactor = 80)`.execute(db);
}
