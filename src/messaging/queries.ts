import { sql, type Kysely, type OperationNodeSource, type RawBuilder } from 'kysely';
import { chunkOf } from '../db/chunks.ts';
import type { DialectName } from '../db/dialect.ts';
import { inJson } from '../db/in-json.ts';
import type { Schema } from '../db/schema.ts';
import { enqueueMany, enqueueWithWrites, type NewJob } from '../queue/queue.ts';

/**
 * The messaging statements that differ by database. Rows travel as ONE JSON parameter of
 * objects unpacked in SQL (as crm/queries.ts explains), each field read by its name; on SQLite
 * by jsonb_each (sms/queries.ts says why).
 */

type Db = Kysely<Schema>;

/** A request's recipient row to insert: `tags` in JSON (sealed when the send's body is), or null. */
export interface RecipientRow {
  sendId: string;
  /** The accept's time, epoch ms. */
  now: number;
  address: string;
  tags: string | null;
  contactId: number | null;
}

/** An erased person's suppression of an address (recipients.ts, erasedAmong). */
export interface ErasedReason {
  address: string;
  reason: string;
}

/** An address to settle (recipients.ts, addressStanding), with its keyed hash for the erased's suppressions. */
export interface StandingKey {
  accountId: string;
  address: string;
  erasedHash: string;
}

/** One count of a UsageTally (rollup.ts), as usage_deltas holds it. */
export interface UsageDelta {
  accountId: string;
  channel: string;
  status: string;
  encoding: string;
  /** The currency of `costMicros`; '' for none. */
  currency: string;
  messages: number;
  parts: number;
  costMicros: number;
}

const ADD_TO_ROLLUP = sql`on conflict (account_id, channel, bucket, status, encoding, currency)
                          do update set messages = usage_rollup.messages + excluded.messages,
                                        parts = usage_rollup.parts + excluded.parts,
                                        cost_micros = usage_rollup.cost_micros + excluded.cost_micros`;

/** The rows of accepts: the send rows and their own recipients (writeSends's `rows` and `ownRecipients`). */
export type AcceptWrites = Array<OperationNodeSource & { execute(db: Db): Promise<unknown> }>;

const SQLITE = {
  /** An epoch-ms parameter as a column of the send tables takes it. */
  epochMs: (ms: number): RawBuilder<number> => sql`${ms}`,

  // SQLite's planner, with no statistics, would walk all the account's sends and look the
  // addresses up in each; its CROSS JOIN keeps the recipients (by address) the outer loop.
  recipientsToSends: sql`cross join`,

  /** Whether the send `s` names the list among its list_ids (a JSON array). */
  sendNamesList: (listId: string) => sql<boolean>`exists (select 1 from json_each(s.list_ids) where value = ${listId})`,

  /** Erased people's suppressions found among some addresses, as a table `(address, reason)`. */
  erasedReasons: (rows: readonly ErasedReason[]) =>
    sql`(select value ->> 'address' as address, value ->> 'reason' as reason from json_each(${JSON.stringify(rows)}))`,

  /** Addresses as a table with one column, `address`, to select from (the dry run's request recipients). */
  addressTable: (addresses: readonly string[]) =>
    sql`(select value as address from json_each(${JSON.stringify(addresses)}))`,

  /** Address checks' keys as a table `k` (i, account_id, address, hash), `i` each key's place from 0. */
  standingKeys: (keys: readonly StandingKey[]) =>
    sql`(select key as i, value ->> 'accountId' as account_id, value ->> 'address' as address,
                value ->> 'erasedHash' as hash
           from json_each(${JSON.stringify(keys)})) k`,

  insertRequestRecipients: (rows: RecipientRow[]) => sql`
    insert into send_recipients (send_id, address, tags, contact_id, status, updated_at, bound_tokens)
    select value ->> 'sendId', value ->> 'address', value ->> 'tags', value ->> 'contactId', 'Queued', value ->> 'now',
           true
      from jsonb_each(${JSON.stringify(rows)}) where true
    on conflict (send_id, address) do nothing`,

  /** Of the content's JSON object, the fields `keys` names, as a JSON object (`{}` when none). */
  contentFields: (keys: readonly string[]) =>
    sql`(select json_group_object(key, value) from json_each(content) where key in ${inJson('sqlite', keys)})`,

  insertUsageDeltas: (bucket: number, deltas: UsageDelta[]) => sql`
    insert into usage_deltas (account_id, channel, bucket, status, encoding, currency, messages, parts, cost_micros)
    select value ->> 'accountId', value ->> 'channel', ${bucket}, value ->> 'status', value ->> 'encoding',
           value ->> 'currency', value ->> 'messages', value ->> 'parts', value ->> 'costMicros'
      from jsonb_each(${JSON.stringify(deltas)})`,

  /** Adds at most `limit` of the oldest deltas to the rollup and deletes them; answers how many. */
  async foldUsage(trx: Db, limit: number): Promise<number> {
    const last = await trx
      .selectFrom('usage_deltas')
      .select('id')
      .orderBy('id')
      .offset(limit - 1)
      .limit(1)
      .executeTakeFirst();
    const upTo = last?.id ?? Number.MAX_SAFE_INTEGER;
    await sql`insert into usage_rollup (account_id, channel, bucket, status, encoding, currency, messages, parts,
                                        cost_micros)
              select account_id, channel, bucket, status, encoding, currency, sum(messages), sum(parts),
                     sum(cost_micros)
                from usage_deltas where id <= ${upTo}
               group by 1, 2, 3, 4, 5, 6 ${ADD_TO_ROLLUP}`.execute(trx);
    const deleted = await trx.deleteFrom('usage_deltas').where('id', '<=', upTo).executeTakeFirst();
    return Number(deleted.numDeletedRows);
  },

  /** The writes of accepts and their jobs, in the caller's transaction. */
  async writeAccepts(db: Db, writes: AcceptWrites, jobs: NewJob[]): Promise<void> {
    for (const write of writes) await write.execute(db);
    await enqueueMany(db, jobs);
  },

  /** After an expansion of more than one range: nothing to do on SQLite. */
  async expanded(_db: Db): Promise<void> {},

  /** Before the ranges of a list after the first: nothing to do on SQLite. */
  async listsFresh(_db: Db): Promise<void> {},
};

const POSTGRES: typeof SQLITE = {
  epochMs: (ms) => sql`${ms}::bigint`,

  recipientsToSends: sql`join`,

  erasedReasons: (rows) =>
    sql`(select v ->> 'address' as address, v ->> 'reason' as reason
           from jsonb_array_elements(${JSON.stringify(rows)}::jsonb) v)`,

  addressTable: (addresses) => sql`(select unnest(${addresses}::text[]) as address)`,

  // From JSON rather than arrays: the planner counts a constant array's elements, so each
  // group's own plan, costed by its size, would always look cheaper than the one kept.
  standingKeys: (keys) =>
    sql`(select n - 1 as i, v ->> 'accountId' as account_id, v ->> 'address' as address, v ->> 'erasedHash' as hash
           from jsonb_array_elements(${JSON.stringify(keys)}::jsonb) with ordinality u(v, n)) k`,

  sendNamesList: (listId) => sql<boolean>`s.list_ids::jsonb ? ${listId}`,

  insertRequestRecipients: (rows) => sql`
    insert into send_recipients (send_id, address, tags, contact_id, status, updated_at, bound_tokens)
    select r ->> 'sendId', r ->> 'address', r ->> 'tags', (r ->> 'contactId')::bigint, 'Queued', (r ->> 'now')::bigint,
           true
      from jsonb_array_elements(${JSON.stringify(rows)}::jsonb) r
    on conflict (send_id, address) do nothing`,

  contentFields: (keys) =>
    sql`(select coalesce(jsonb_object_agg(key, value), '{}')::text from jsonb_each(content::jsonb)
          where key in ${inJson('postgres', keys)})`,

  insertUsageDeltas: (bucket, deltas) => sql`
    insert into usage_deltas (account_id, channel, bucket, status, encoding, currency, messages, parts, cost_micros)
    select r ->> 'accountId', r ->> 'channel', ${bucket}::bigint, r ->> 'status', r ->> 'encoding', r ->> 'currency',
           (r ->> 'messages')::bigint, (r ->> 'parts')::bigint, (r ->> 'costMicros')::bigint
      from jsonb_array_elements(${JSON.stringify(deltas)}::jsonb) r`,

  // One statement. The delete takes a chunk of the rows it sees (db/chunks.ts), so a delta
  // whose transaction commits meanwhile waits for the next fold.
  async foldUsage(trx, limit) {
    const { rows } = await sql<{ n: string }>`
      with moved as (delete from usage_deltas where ${chunkOf('postgres', 'usage_deltas', sql`true`, limit, 'id')}
                     returning account_id, channel, bucket, status, encoding, currency, messages, parts,
                               cost_micros),
           added as (insert into usage_rollup (account_id, channel, bucket, status, encoding, currency, messages,
                                               parts, cost_micros)
                     select account_id, channel, bucket, status, encoding, currency, sum(messages), sum(parts),
                            sum(cost_micros)
                       from moved group by 1, 2, 3, 4, 5, 6
                     order by 1, 2, 3, 4, 5, 6 ${ADD_TO_ROLLUP})
      select count(*) as n from moved`.execute(trx);
    return Number(rows[0].n);
  },

  // One statement, so a group of accepts costs one round trip.
  async writeAccepts(db, writes, jobs) {
    await enqueueWithWrites(db, jobs, writes);
  },

  /**
   * An ANALYZE of send_recipients. Its statistics know nothing of a send just written, and
   * take the recipients of one to be a handful (a new send_id is not among the values they
   * count), so each page's read planned a bitmap scan of all the send's remaining recipients
   * and a sort of them, 15 ms a page, rather than the first 500 in index order; autovacuum
   * gets to the table only a minute or more later. ANALYZE samples a fixed number of rows
   * whatever the table's size, and SKIP_LOCKED leaves it to autovacuum when that is already at it.
   */
  async expanded(db) {
    await sql`analyze (skip_locked) send_recipients`.execute(db);
  },

  /**
   * An ANALYZE of contacts and list_members when a tenth of them changed since their last (as
   * autovacuum would, a minute or more later). Right after a list was imported, their
   * statistics held the account to a thousand contacts, and each range's end (nextRange) was
   * planned as a bitmap scan of every contact after it and a sort: 214 ms a range of 2,000 at
   * 1,000,000 contacts, against 3 ms by the index in order. An ANALYZE samples a fixed number
   * of rows: 0.6 s at 1,000,000 contacts, once a send.
   */
  async listsFresh(db) {
    const { rows } = await sql<{ stale: boolean | null }>`
      select bool_or(s.n_mod_since_analyze > 0.1 * greatest(c.reltuples, 0) + 50) as stale
        from pg_stat_user_tables s join pg_class c on c.oid = s.relid
       where s.schemaname = current_schema() and s.relname in ('contacts', 'list_members')`.execute(db);
    if (rows[0]?.stale) await sql`analyze (skip_locked) contacts, list_members`.execute(db);
  },
};

export const queries: Record<DialectName, typeof SQLITE> = { sqlite: SQLITE, postgres: POSTGRES };
