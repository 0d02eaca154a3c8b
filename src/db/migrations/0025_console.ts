import { sql, type Kysely } from 'kysely';

/**
 * The console's sign-ins (src/auth/console-sessions.ts), and the index behind one of its reads
 * that API clients want too: the webhook deliveries that are failing
 * (GET /webhooks/deliveries?failing=true).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  // id_hash: SHA-256 (hex) of the cookie's secret, so a read of the table signs no one in.
  // token_version: the account's when it signed in; a password change or private-token
  // rotation moves the account's on, and ends the session as it ends access tokens.
  await db.schema
    .createTable('console_sessions')
    .addColumn('id_hash', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('token_version', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('console_sessions_expiry').on('console_sessions').column('expires_at').execute();

  // A delivery whose last attempt failed, given up or waiting for its retry: few, however many went through.
  await db.schema
    .createIndex('webhook_deliveries_failing')
    .on('webhook_deliveries')
    .columns(['account_id', 'created_at', 'id'])
    .where(sql<boolean>`status <> 'delivered' and attempts > 0`)
    .execute();
}
