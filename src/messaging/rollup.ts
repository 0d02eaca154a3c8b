import { sql, type Kysely } from 'kysely';
import type { DialectName } from '../db/database.ts';
import type { Schema } from '../db/schema.ts';
import type { Channel } from './recipients.ts';

/** A rollup bucket: a quarter-hour, the finest step of an account's offset (UTC+05:45), so any account's day or hour is whole buckets. */
export const BUCKET_MS = 15 * 60_000;

/**
 * The statuses one transaction gave messages, counted for usage_rollup (migration 0023) and
 * written by `write` in ONE statement, the transaction's last: whatever the page's size, a
 * handful of rows (one per account, status and encoding), not one per message.
 *
 * Last, and in key order, because on PostgreSQL an upsert locks its rows until commit: with
 * every transaction taking its rollup rows last and in one order, two transactions never wait
 * for each other both (a page and a receipt that both count Delivered for one account only
 * queue for the sub-millisecond rest of the first's commit).
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

  /** Adds the counts to the rollup, in the caller's transaction: one statement, or none when nothing was counted. */
  async write(db: Kysely<Schema>, dialect: DialectName): Promise<void> {
    const rows = this.rows();
    if (rows.length === 0) return;
    const bucket = Math.floor(this.now / BUCKET_MS);
    const json = JSON.stringify(rows);
    const upsert = sql`on conflict (account_id, channel, bucket, status, encoding)
                       do update set messages = usage_rollup.messages + excluded.messages, parts = usage_rollup.parts + excluded.parts`;
    await (dialect === 'sqlite'
      ? sql`insert into usage_rollup (account_id, channel, bucket, status, encoding, messages, parts)
            select value ->> 0, value ->> 1, ${bucket}, value ->> 2, value ->> 3, value ->> 4, value ->> 5 from json_each(${json}) where true ${upsert}`
      : sql`insert into usage_rollup (account_id, channel, bucket, status, encoding, messages, parts)
            select r ->> 0, r ->> 1, ${bucket}::bigint, r ->> 2, r ->> 3, (r ->> 4)::bigint, (r ->> 5)::bigint from jsonb_array_elements(${json}::jsonb) r ${upsert}`
    ).execute(db);
  }
}
