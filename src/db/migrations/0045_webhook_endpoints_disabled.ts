import type { Kysely } from 'kysely';

/**
 * When an endpoint's receiver answered 410 Gone (Standard Webhooks: the sender disables the
 * endpoint), src/webhooks/endpoints.ts: no event is posted there from then on; null while it
 * takes events.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('webhook_endpoints').addColumn('disabled_at', 'bigint').execute();
}
