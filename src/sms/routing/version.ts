import { sql, type Kysely } from 'kysely';
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

/**
 * Moves the version on, first in a change's transaction: the row is its lock, so changes to the
 * connections and the routes go one after another, each reading what the one before committed
 * (a route naming a connection being removed is refused, or the removal is), and no two end on
 * the same version, which a worker that read between them would keep for good.
 */
export async function bumpRoutingVersion(trx: Kysely<Schema>): Promise<void> {
  await trx
    .insertInto('settings')
    .values({ key: ROUTING_VERSION, value: '1' })
    .onConflict((oc) =>
      oc.column('key').doUpdateSet({ value: sql<string>`cast(cast(settings.value as bigint) + 1 as text)` }),
    )
    .execute();
}
