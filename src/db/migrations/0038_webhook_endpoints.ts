import type { Kysely } from 'kysely';

/**
 * Account-wide webhook endpoints (ARCHITECTURE.md, "Access and integration";
 * src/webhooks/endpoints.ts): each URL an account has subscribed to event types, where every
 * such event of the account is posted besides any per-request URL. Read by every append of
 * events, by account: the index leads with it.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('webhook_endpoints')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    // Normalised (WHATWG URL: scheme and host in lower case, no default port), as posted.
    .addColumn('url', 'text', (c) => c.notNull())
    // JSON array of the event types it takes, in the order of ENDPOINT_EVENTS.
    .addColumn('events', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('webhook_endpoints_account')
    .on('webhook_endpoints')
    .columns(['account_id', 'created_at'])
    .execute();
}
