/**
 * Messages no receipt settled: after SMS_RECEIPT_TIMEOUT_HOURS (48) from their send's
 * completion, a recipient still Submitted or Processed ends Failed, with its reason, its
 * history and its webhook event, as an operator's validity period would have ended it. An
 * hourly recurring job (queue/recurring.ts), a chunk a transaction.
 */
import { sql } from 'kysely';
import type { Clock } from '../clock.ts';
import type { Database } from '../db/database.ts';
import { procedure } from '../db/procedure.ts';
import { recurringHandler } from '../queue/recurring.ts';
import type { JobHandler } from '../queue/worker.ts';
import { appendToStreams } from '../webhooks/events.ts';
import { UsageTally } from '../messaging/rollup.ts';
import { notFinal } from './queries.ts';
import { applyStranded, SMS_STATUS_TYPE, smsStatusEvent } from './receipts.ts';

export const RECEIPT_EXPIRY_KIND = 'sms.receipt-expiry';
const EVERY_MS = 60 * 60_000;
const HOUR_MS = 60 * 60_000;
/** Recipients a transaction settles at most. */
const CHUNK = 1000;
/**
 * How far before the timeout a run still looks: sends completed longer ago than the timeout
 * and this are left alone, so a run reads the sends of about an hour (the index on
 * completed_at) however many there are. A job stopped for longer than this leaves its
 * messages as they are.
 */
const LOOK_BACK_MS = 7 * 24 * HOUR_MS;

export const expiryReason = (hours: number) =>
  `no receipt within ${hours} h of the submit: the operator never reported it`;

/** One chunk: answers how many recipients it read, and how many of them it ended Failed. */
export const expireUnreceipted = procedure(
  import.meta.url,
  'expireUnreceipted',
  async ({ db, dialect }, args: { now: number; timeoutHours: number }): Promise<{ read: number; ended: number }> =>
    db.transaction().execute(async (trx) => {
      const cutoff = args.now - args.timeoutHours * HOUR_MS;
      const rows = await trx
        .selectFrom('sends as s')
        .innerJoin('send_recipients as r', 'r.send_id', 's.id')
        .select([
          'r.id',
          'r.address',
          'r.message_id',
          'r.parts',
          'r.encoding',
          's.id as send_id',
          's.account_id',
          's.webhook_url',
        ])
        .where('s.channel', '=', 'sms')
        .where('s.completed_at', '<', cutoff)
        .where('s.completed_at', '>=', cutoff - LOOK_BACK_MS)
        .where('r.status', 'in', ['Submitted', 'Processed'])
        .limit(CHUNK)
        .execute();
      if (rows.length === 0) return { read: 0, ended: 0 };
      const error = expiryReason(args.timeoutHours);
      // A receipt that ended one meanwhile (PostgreSQL: this waited for its row) stands.
      const ended = await trx
        .updateTable('send_recipients')
        .set({ status: 'Failed', error, updated_at: args.now })
        .where(
          'id',
          'in',
          rows.map((row) => Number(row.id)),
        )
        .where('status', 'in', ['Submitted', 'Processed'])
        .returning('id')
        .execute();
      const ids = ended.map((row) => Number(row.id));
      const endedIds = new Set(ids);
      const expired = rows.filter((row) => endedIds.has(Number(row.id)));
      if (expired.length === 0) return { read: rows.length, ended: 0 };
      await trx
        .updateTable('sms_parts')
        .set({ status: 'Failed' })
        .where('recipient_id', 'in', ids)
        .where(notFinal(sql.ref('status')))
        .execute();
      await trx
        .insertInto('recipient_history')
        .values(ids.map((id) => ({ recipient_id: id, status: 'Failed', at: args.now })))
        .execute();
      await appendToStreams(
        trx,
        { now: () => args.now },
        SMS_STATUS_TYPE,
        expired.map((row) => ({
          accountId: row.account_id,
          url: row.webhook_url,
          event: smsStatusEvent({
            queueId: row.send_id,
            messageId: row.message_id,
            recipient: row.address,
            status: 'Failed',
            errorCode: null,
            error,
            parts: row.parts,
            at: args.now,
          }),
        })),
      );
      const tally = new UsageTally(args.now);
      for (const row of expired)
        tally.add(row.account_id, 'sms', 'Failed', { parts: row.parts, encoding: row.encoding });
      await tally.write(trx, dialect);
      return { read: rows.length, ended: expired.length };
    }),
);

/** One chunk of kept receipts whose part is recorded (receipts.ts's applyStranded). */
export const applyStrandedReceipts = procedure(
  import.meta.url,
  'applyStrandedReceipts',
  async ({ db, dialect }, args: { now: number }): Promise<number> => applyStranded(db, dialect, args.now, CHUNK),
);

/**
 * Every chunk due at `now`; answers how many recipients ended Failed. Receipts a crash left
 * waiting beside their part are applied first: their messages are not unreceipted. Stops
 * between chunks once `signal` aborts.
 */
export async function expireAll(
  database: Database,
  now: number,
  timeoutHours: number,
  signal?: AbortSignal,
): Promise<number> {
  while (!signal?.aborted && (await database.call(applyStrandedReceipts, { now })) === CHUNK);
  let total = 0;
  while (!signal?.aborted) {
    const { read, ended } = await database.call(expireUnreceipted, { now, timeoutHours });
    total += ended;
    if (read < CHUNK) break;
  }
  return total;
}

export function receiptExpiryHandler(deps: {
  database: Database;
  clock: Clock;
  config: { smsReceiptTimeoutHours: number };
}): JobHandler {
  return recurringHandler(deps.clock, {
    kind: RECEIPT_EXPIRY_KIND,
    everyMs: EVERY_MS,
    run: async (signal) => {
      await expireAll(deps.database, deps.clock.now(), deps.config.smsReceiptTimeoutHours, signal);
    },
  });
}
