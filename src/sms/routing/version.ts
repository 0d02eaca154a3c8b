import type { Kysely } from 'kysely';
import type { Schema } from '../../db/schema.ts';

/**
 * The settings row every change to the connections or the routing table bumps, in the change's
 * own transaction: each worker process polls it and reloads both when it moved.
 */
const ROUTING_VERSION = 'sms_routing_version';

export async function routingVersion(db: Kysely<Schema>): Promise<number> {
  const row = await db.selectFrom('settings').select('value').where('key', '=', ROUTING_VERSION).executeTakeFirst();
  return row ? Number(row.value) : 0;
}

export async function bumpRoutingVersion(trx: Kysely<Schema>): Promise<void> {
  const next = String((await routingVersion(trx)) + 1);
  await trx
    .insertInto('settings')
    .values({ key: ROUTING_VERSION, value: next })
    .onConflict((oc) => oc.column('key').doUpdateSet({ value: next }))
    .execute();
}
