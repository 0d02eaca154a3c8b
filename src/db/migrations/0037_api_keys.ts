import type { Kysely } from 'kysely';

/**
 * API keys (ARCHITECTURE.md, "Access and integration"; src/auth/api-keys.ts): each key of an
 * account with its name and scopes, kept as the SHA-256 of the key alone, so a read of the table
 * (or a backup) authenticates no one. Revoking a key deletes its row.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('api_keys')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    // JSON array of the key's scopes, in the order of SCOPES.
    .addColumn('scopes', 'text', (c) => c.notNull())
    // SHA-256 of the whole key (hk_…), base64url: the bearer check finds the key by it.
    .addColumn('key_hash', 'text', (c) => c.notNull().unique())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint')
    .addColumn('last_used_at', 'bigint')
    .execute();
  await db.schema.createIndex('api_keys_account').on('api_keys').columns(['account_id', 'created_at']).execute();
}
