import { sql, type Kysely, type SqlBool } from 'kysely';
import type { Clock } from '../clock.ts';
import { chunkOf } from '../db/chunks.ts';
import type { Database, DialectName } from '../db/database.ts';
import { procedure, type ProcedureDatabase } from '../db/procedure.ts';
import type { Schema } from '../db/schema.ts';
import { inJson } from '../db/in-json.ts';
import { purgeExpiredIdempotencyKeys } from '../http/idempotency.ts';
import { purgeDeadJobs } from '../queue/queries.ts';
import { recurringHandler } from '../queue/recurring.ts';
import type { JobHandler } from '../queue/worker.ts';
import { purgeSettledDeliveries } from '../webhooks/outbox.ts';
import { purgeAuditEntries } from '../audit/entries.ts';
import { queries } from './queries.ts';
import type { Channel } from './recipients.ts';

type Db = Kysely<Schema>;

/**
 * Retention (RETENTION_DAYS): what a send said, to whom in what words, goes some days after
 * the send completes; what became of it stays. A purged send keeps its status, its
 * recipients with their statuses, reasons, errors, history and parts, and so its totals and
 * reads (`GET /sms/{queueId}`); it loses its body and tags (`sends.content`, all but the
 * fields KEPT_CONTENT names), its recipients' own tags (`send_recipients.tags`) and the
 * sandbox's copies of its messages. The worker reads none of these after a send completes.
 *
 * One sweep an hour, across every process (a recurring job, queue/recurring.ts), also lets go
 * of what nothing else deletes: dead jobs, webhook deliveries no longer pending, receipts that
 * never matched a part (all after RETENTION_DAYS), expired Idempotency-Key records, and audit
 * entries after AUDIT_RETENTION_DAYS.
 */

/** The queue kind of the sweep; its one job is its own idempotency key. */
export const RETENTION_KIND = 'messaging.retention';

/** From the end of one sweep to the start of the next. */
export const RETENTION_EVERY_MS = 60 * 60_000;

const DAY_MS = 24 * 60 * 60_000;

/**
 * Work per transaction. SQLite has one writer: a chunk holds it for tens of milliseconds, and
 * the requests and sends waiting behind it go between two chunks, however much there is to purge.
 */
export interface ChunkLimits {
  /** Sends marked purged in one transaction. */
  sends: number;
  /** Rows deleted or cleared in one transaction. */
  rows: number;
}

export const CHUNK_LIMITS: ChunkLimits = { sends: 1000, rows: 10_000 };

/** What a purged send keeps of its content, by channel: what names the send, never what it said. */
const KEPT_CONTENT: Record<Channel, readonly string[]> = {
  sms: ['kind', 'senderName'],
  // The URLs of its tracked links, which clicks on mail already delivered still lead to.
  email: ['links'],
};

/** The content's kept fields, by the send's channel, as a JSON object (`{}` when none). */
function keptContent(dialect: DialectName) {
  const cases = (Object.entries(KEPT_CONTENT) as Array<[Channel, readonly string[]]>).map(
    ([channel, keys]) => sql`when ${channel} then ${queries[dialect].contentFields(keys)}`,
  );
  return sql<string>`case channel ${sql.join(cases, sql` `)} end`;
}

/**
 * A statement that lets go of at most `limit` rows belonging to the sends `ids`; answers how
 * many it did. Rows are picked by id (db/chunks.ts): one a late receipt updates meanwhile is
 * taken all the same, since the sends are marked purged once a chunk finds none left. Nothing
 * else writes these rows of a finished send, so the statement needs no condition of its own.
 */
type SendRowsStep = (db: Db, dialect: DialectName, ids: string[], limit: number) => Promise<number>;

const SEND_ROWS: SendRowsStep[] = [
  async function deleteSandboxSms(db, dialect, ids, limit) {
    const ofSends = sql<SqlBool>`send_id in ${inJson(dialect, ids)}`;
    const result = await db
      .deleteFrom('sandbox_sms')
      .where(chunkOf(dialect, 'sandbox_sms', ofSends, limit, 'id'))
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  },
  async function deleteSandboxEmail(db, dialect, ids, limit) {
    const ofSends = sql<SqlBool>`send_id in ${inJson(dialect, ids)}`;
    const result = await db
      .deleteFrom('sandbox_email')
      .where(chunkOf(dialect, 'sandbox_email', ofSends, limit, 'id'))
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  },
  async function clearRecipientTags(db, dialect, ids, limit) {
    // Found through send_recipients_tagged: only the rows that have tags are read.
    const tagged = sql<SqlBool>`send_id in ${inJson(dialect, ids)} and tags is not null`;
    const result = await db
      .updateTable('send_recipients')
      .set({ tags: null })
      .where(chunkOf(dialect, 'send_recipients', tagged, limit, 'id'))
      .executeTakeFirst();
    return Number(result.numUpdatedRows);
  },
];

export interface SendsChunk {
  /** Sends marked purged. */
  sends: number;
  /** Their rows deleted or cleared. */
  rows: number;
  /** The chunk stopped at a limit: there may be more to purge. */
  more: boolean;
}

/**
 * One transaction of the purge: the oldest finished sends not yet purged that completed
 * before `before`, at most `limits.sends` of them. Their rows go first, at most `limits.rows`
 * in all; only when none is left are the sends' contents cut and the sends marked, so a send
 * with more rows than one chunk takes is finished by the chunks after it (each starting
 * where the last stopped: what it deleted or cleared is not found again).
 */
export const purgeSendsChunk = procedure(
  import.meta.url,
  'purgeSendsChunk',
  async ({ db, dialect }, args: { before: number; now: number; limits: ChunkLimits }): Promise<SendsChunk> =>
    db.transaction().execute(async (trx) => {
      const sends = await trx
        .selectFrom('sends')
        .select('id')
        .where('purged_at', 'is', null)
        .where('completed_at', 'is not', null)
        .where('completed_at', '<', args.before)
        .where('status', 'in', ['Completed', 'Cancelled'])
        .orderBy('completed_at')
        .limit(args.limits.sends)
        .execute();
      if (sends.length === 0) return { sends: 0, rows: 0, more: false };
      const ids = sends.map((send) => send.id);
      let rows = 0;
      for (const step of SEND_ROWS) {
        rows += await step(trx, dialect, ids, args.limits.rows - rows);
        if (rows === args.limits.rows) return { sends: 0, rows, more: true };
      }
      await trx
        .updateTable('sends')
        .set({ content: keptContent(dialect), purged_at: args.now })
        .where('id', 'in', inJson(dialect, ids))
        .execute();
      return { sends: ids.length, rows, more: ids.length === args.limits.sends };
    }),
);

/**
 * A store of a channel's own that the sweep empties of what is older than `before`: deletes
 * at most `limit` rows in one transaction and answers how many. The channels hand theirs to
 * the sweep (src/server/worker.ts), which knows none of them.
 */
export type Purge = (database: ProcedureDatabase, before: number, limit: number) => Promise<number>;

export interface SweepReport {
  /** Sends whose bodies, tags and sandbox records were purged. */
  sends: number;
  /** Their sandbox records deleted and recipients' tags cleared. */
  sendRows: number;
  deadJobs: number;
  deliveries: number;
  idempotencyKeys: number;
  /** Audit entries older than AUDIT_RETENTION_DAYS (counted when the sweep is given that). */
  auditEntries: number;
  /** Rows each channel's purge deleted, by its name. */
  channels: Record<string, number>;
  /** Transactions it took. */
  transactions: number;
}

/**
 * One sweep: everything due at `now`, in chunks of at most `limits`, one transaction each.
 * Stops between two chunks once `signal` aborts, leaving the rest to the next sweep.
 */
export async function sweep(
  database: Database,
  now: number,
  retentionDays: number,
  options: {
    signal?: AbortSignal;
    limits?: ChunkLimits;
    channelPurges?: Record<string, Purge>;
    /** AUDIT_RETENTION_DAYS; unset: the audit log is left alone. */
    auditRetentionDays?: number;
  } = {},
): Promise<SweepReport> {
  const { signal, limits = CHUNK_LIMITS, channelPurges = {}, auditRetentionDays } = options;
  const before = now - retentionDays * DAY_MS;
  const report: SweepReport = {
    sends: 0,
    sendRows: 0,
    deadJobs: 0,
    deliveries: 0,
    idempotencyKeys: 0,
    auditEntries: 0,
    channels: {},
    transactions: 0,
  };
  /** Runs `chunk` until it says there is no more, or the sweep is told to stop. */
  const inChunks = async (chunk: () => Promise<boolean>) => {
    while (!signal?.aborted) {
      report.transactions += 1;
      if (!(await chunk())) return;
    }
  };
  const deleting = (purge: Purge, count: (deleted: number) => void, cutoff: number) =>
    inChunks(async () => {
      const deleted = await purge(database, cutoff, limits.rows);
      count(deleted);
      return deleted === limits.rows;
    });

  await inChunks(async () => {
    const chunk = await database.call(purgeSendsChunk, { before, now, limits });
    report.sends += chunk.sends;
    report.sendRows += chunk.rows;
    return chunk.more;
  });
  for (const [name, purge] of Object.entries(channelPurges)) {
    report.channels[name] = 0;
    await deleting(purge, (n) => (report.channels[name] += n), before);
  }
  await deleting(purgeDeadJobs, (n) => (report.deadJobs += n), before);
  await deleting(purgeSettledDeliveries, (n) => (report.deliveries += n), before);
  // Records of Idempotency-Keys go when the key is no longer honoured (24 hours), whatever RETENTION_DAYS says.
  await deleting(purgeExpiredIdempotencyKeys, (n) => (report.idempotencyKeys += n), now);
  if (auditRetentionDays !== undefined) {
    await deleting(purgeAuditEntries, (n) => (report.auditEntries += n), now - auditRetentionDays * DAY_MS);
  }
  return report;
}

/** The sweep's job handler: registered by every worker (src/server/worker.ts), run by one at a time. */
export function retentionHandler(
  deps: { database: Database; clock: Clock; config: { retentionDays: number; auditRetentionDays: number } },
  channelPurges: Record<string, Purge>,
): JobHandler {
  return recurringHandler(deps.clock, {
    kind: RETENTION_KIND,
    everyMs: RETENTION_EVERY_MS,
    run: async (signal) => {
      const { retentionDays, auditRetentionDays } = deps.config;
      await sweep(deps.database, deps.clock.now(), retentionDays, { signal, channelPurges, auditRetentionDays });
    },
  });
}
