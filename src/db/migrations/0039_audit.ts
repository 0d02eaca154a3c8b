import { PostgresAdapter, type ColumnDefinitionBuilder, type Kysely } from 'kysely';

/**
 * The audit log (ARCHITECTURE.md, "Access and integration"; src/audit/): who changed what in an
 * account, one row per change, written in the change's own transaction. A person's number or
 * address is kept only as its keyed hash (the erased identifiers' hash), never in clear. Rows go
 * after AUDIT_RETENTION_DAYS, and with their account.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  // SQLite's INTEGER PRIMARY KEY is the rowid; PostgreSQL numbers rows by identity.
  const serial = (c: ColumnDefinitionBuilder) =>
    postgres ? c.primaryKey().generatedByDefaultAsIdentity() : c.primaryKey();
  await db.schema
    .createTable('audit_entries')
    .addColumn('id', postgres ? 'bigint' : 'integer', serial)
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('at', 'bigint', (c) => c.notNull())
    // token, apiKey:<apiKeyId>, console or admin.
    .addColumn('actor', 'text', (c) => c.notNull())
    .addColumn('action', 'text', (c) => c.notNull())
    // What was changed: an id, or a person's identifier as its keyed hash; null for the account itself.
    .addColumn('target', 'text')
    .addColumn('ip', 'text')
    .execute();
  // An account's entries newest first, a page at a time (GET /audit).
  await db.schema.createIndex('audit_entries_account').on('audit_entries').columns(['account_id', 'id']).execute();
  // The retention sweep's oldest first.
  await db.schema.createIndex('audit_entries_at').on('audit_entries').column('at').execute();
}
