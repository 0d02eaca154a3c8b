import type { Kysely } from 'kysely';
import type { Clock } from '../clock.ts';
import type { Database, DialectName } from '../db/database.ts';
import { procedure } from '../db/procedure.ts';
import type { Schema } from '../db/schema.ts';
import { recurringHandler } from '../queue/recurring.ts';
import type { JobHandler } from '../queue/worker.ts';
import { queries, type UsageDelta } from './queries.ts';
import type { Channel } from './recipients.ts';

/**
 * A rollup bucket: a quarter-hour, the finest step of an account's offset (UTC+05:45), so any
 * account's day or hour is whole buckets.
 */
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
  readonly #counts = new Map<string, { messages: number; parts: number; costMicros: number }>();

  constructor(now: number) {
    this.now = now;
  }

  /**
   * `messages` recipients of the account reached `status`; `parts`: their SMS parts together, in
   * `encoding`; `cost`: what they cost, in micro-units of its currency.
   */
  add(
    accountId: string,
    channel: Channel,
    status: string,
    count: {
      messages?: number;
      parts?: number | null;
      encoding?: string | null;
      cost?: { micros: number; currency: string } | null;
    } = {},
  ): void {
    const key = JSON.stringify([accountId, channel, status, count.encoding ?? '', count.cost?.currency ?? '']);
    const sum = this.#counts.get(key) ?? { messages: 0, parts: 0, costMicros: 0 };
    sum.messages += count.messages ?? 1;
    sum.parts += Number(count.parts ?? 0);
    sum.costMicros += count.cost?.micros ?? 0;
    this.#counts.set(key, sum);
  }

  /** The counts as added, in key order. */
  rows(): UsageDelta[] {
    return [...this.#counts.entries()]
      .filter(([, sum]) => sum.messages > 0)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([key, sum]) => {
        const [accountId, channel, status, encoding, currency] = JSON.parse(key) as string[];
        return { accountId, channel, status, encoding, currency, ...sum };
      });
  }

  /** Appends the counts, in the caller's transaction: one statement, or none when nothing was counted. */
  async write(db: Kysely<Schema>, dialect: DialectName): Promise<void> {
    const rows = this.rows();
    if (rows.length === 0) return;
    await queries[dialect].insertUsageDeltas(Math.floor(this.now / BUCKET_MS), rows).execute(db);
  }
}

/** Deltas a fold takes at most: one transaction of a bounded size, however long folding waited. */
const FOLD_ROWS = 50_000;

/**
 * Adds at most FOLD_ROWS deltas to the rollup and deletes them, in one transaction; answers how
 * many it took (each database's statement in messaging/queries.ts). Run by one job at a time
 * (USAGE_FOLD_KIND), so the rollup's rows have one writer.
 */
export const foldUsage = procedure(
  import.meta.url,
  'foldUsage',
  async ({ db, dialect }, _args: Record<string, never>): Promise<number> =>
    db.transaction().execute((trx) => queries[dialect].foldUsage(trx, FOLD_ROWS)),
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
