import { sql, type Kysely } from 'kysely';
import type { Clock } from '../clock.ts';
import { chunkOf } from '../db/chunks.ts';
import type { Database, DialectName } from '../db/database.ts';
import { procedure } from '../db/procedure.ts';
import type { Schema } from '../db/schema.ts';
import { recurringHandler } from '../queue/recurring.ts';
import type { JobHandler } from '../queue/worker.ts';
import type { Channel } from './recipients.ts';

/** A rollup bucket: a quarter-hour, the finest step of an account's offset (UTC+05:45), so any account's day or hour is whole buckets. */
export const BUCKET_MS = 15 * 60_000;

/**
 * The statuses one transaction gave messages, counted for usage_rollup (migration 0023) and
 * written by `write` in ONE statement: whatever the page's size, a handful of rows (one per
 * account, status and encoding), not one per message. Appended to usage_deltas (0024), not
 * added to the rollup's rows: on PostgreSQL an upsert locks its row until commit, and every
 * transaction of an account in a quarter-hour counts into the same few rows, so each page,
 * passcode and receipt waited for the commit of the one before. foldUsage adds them to the
 * rollup, one fold at a time, and the reads (usage.ts) add what is not yet folded.
 */
export class UsageTally {
  readonly now: number;
  readonly #counts = new Map<string, { messages: number; parts: number }>();

  constructor(now: number) {
    this.now = now;
  }

  /** `messages` recipients of the account reached `status`; `parts`: their SMS parts together, in `encoding`. */
  add(accountId: string, channel: Channel, status: string, count: { messages?: number; parts?: number | null; encoding?: string | null } = {}): void {
    const key = JSON.stringify([accountId, channel, status, count.encoding ?? '']);
    const sum = this.#counts.get(key) ?? { messages: 0, parts: 0 };
    sum.messages += count.messages ?? 1;
    sum.parts += Number(count.parts ?? 0);
    this.#counts.set(key, sum);
  }

  /** The counts as added, in key order: [account, channel, status, encoding, messages, parts]. */
  rows(): Array<[string, string, string, string, number, number]> {
    return [...this.#counts.entries()]
      .filter(([, sum]) => sum.messages > 0)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([key, sum]) => [...(JSON.parse(key) as [string, string, string, string]), sum.messages, sum.parts]);
  }

  /** Appends the counts, in the caller's transaction: one statement, or none when nothing was counted. */
  async write(db: Kysely<Schema>, dialect: DialectName): Promise<void> {
    const rows = this.rows();
    if (rows.length === 0) return;
    const bucket = Math.floor(this.now / BUCKET_MS);
    const json = JSON.stringify(rows);
    await (dialect === 'sqlite'
      ? sql`insert into usage_deltas (account_id, channel, bucket, status, encoding, messages, parts)
            select value ->> 0, value ->> 1, ${bucket}, value ->> 2, value ->> 3, value ->> 4, value ->> 5 from json_each(${json})`
      : sql`insert into usage_deltas (account_id, channel, bucket, status, encoding, messages, parts)
            select r ->> 0, r ->> 1, ${bucket}::bigint, r ->> 2, r ->> 3, (r ->> 4)::bigint, (r ->> 5)::bigint from jsonb_array_elements(${json}::jsonb) r`
    ).execute(db);
  }
}

/** Deltas a fold takes at most: one transaction of a bounded size, however long folding waited. */
const FOLD_ROWS = 50_000;

const ADD_TO_ROLLUP = sql`on conflict (account_id, channel, bucket, status, encoding)
                          do update set messages = usage_rollup.messages + excluded.messages, parts = usage_rollup.parts + excluded.parts`;

/**
 * Adds at most FOLD_ROWS deltas to the rollup and deletes them, in one transaction; answers how
 * many it took. On PostgreSQL the delete takes a chunk of the rows it sees (db/chunks.ts), so a
 * delta whose transaction commits meanwhile waits for the next fold. Run by one job at a time (USAGE_FOLD_KIND), so
 * the rollup's rows have one writer.
 */
export const foldUsage = procedure(import.meta.url, 'foldUsage', async ({ db, dialect }, _args: Record<string, never>): Promise<number> =>
  db.transaction().execute(async (trx) => {
    if (dialect === 'postgres') {
      const { rows } = await sql<{ n: string }>`
        with moved as (delete from usage_deltas where ${chunkOf(dialect, 'usage_deltas', sql`true`, FOLD_ROWS, 'id')}
                       returning account_id, channel, bucket, status, encoding, messages, parts),
             added as (insert into usage_rollup (account_id, channel, bucket, status, encoding, messages, parts)
                       select account_id, channel, bucket, status, encoding, sum(messages), sum(parts) from moved group by 1, 2, 3, 4, 5
                       order by 1, 2, 3, 4, 5 ${ADD_TO_ROLLUP})
        select count(*) as n from moved`.execute(trx);
      return Number(rows[0].n);
    }
    const last = await trx.selectFrom('usage_deltas').select('id').orderBy('id').offset(FOLD_ROWS - 1).limit(1).executeTakeFirst();
    const upTo = last?.id ?? Number.MAX_SAFE_INTEGER;
    await sql`insert into usage_rollup (account_id, channel, bucket, status, encoding, messages, parts)
              select account_id, channel, bucket, status, encoding, sum(messages), sum(parts) from usage_deltas where id <= ${upTo}
               group by 1, 2, 3, 4, 5 ${ADD_TO_ROLLUP}`.execute(trx);
    const deleted = await trx.deleteFrom('usage_deltas').where('id', '<=', upTo).executeTakeFirst();
    return Number(deleted.numDeletedRows);
  }),
);

export const USAGE_FOLD_KIND = 'messaging.usage-fold';
/** How often the deltas are folded: the reads add those not yet folded, so this only bounds how many they add. */
const FOLD_EVERY_MS = 10_000;

/** The recurring fold: every FOLD_EVERY_MS, until no delta is left. */
export function usageFoldHandler(deps: { database: Database; clock: Clock }): JobHandler {
  return recurringHandler(deps.clock, {
    kind: USAGE_FOLD_KIND,
    everyMs: FOLD_EVERY_MS,
    run: async (signal) => {
      while (!signal.aborted && (await deps.database.call(foldUsage, {})) === FOLD_ROWS);
    },
  });
}
