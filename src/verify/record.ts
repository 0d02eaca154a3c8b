import type { Kysely, Transaction } from 'kysely';
import { procedure } from '../db/procedure.ts';
import type { Schema, VerificationsTable } from '../db/schema.ts';
import { AppError, tooManyRequests } from '../errors.ts';
import { postProcedure } from '../http/idempotency.ts';
import { writeEmail, type PreparedEmail } from '../email/accept.ts';
import { writeSms, type PreparedSms } from '../sms/accept.ts';
import { appendToStreams } from '../webhooks/events.ts';
import { queries } from './queries.ts';

/**
 * Verify's writes (ARCHITECTURE.md, "Verify (one-time passcodes)"), each one transaction where
 * the data is (db/procedure.ts). The limits are counted in the same transaction as the write
 * they guard, after the number's prefix is locked (queries.ts), so they hold across API
 * processes and never fail open.
 */

type Db = Kysely<Schema>;
type Verification = VerificationsTable;

export const VERIFY_STATUS_TYPE = 'verify.status';

/** A send to one number within this long of the last one is refused. */
export const RESEND_WAIT_MS = 30_000;
/** The window of the limits on sends per number and verifications per prefix. */
export const LIMIT_WINDOW_MS = 10 * 60_000;
/** Codes sent to one number of an account within LIMIT_WINDOW_MS, at most. */
export const MOST_SENDS = 5;
/** Checks per verification, across its resends. */
export const MOST_CHECKS = 5;

/** How a verification reads (GET /verify/{id}, and the 201 of POST /verify). */
export function verificationView(row: Verification, now: number) {
  return {
    verificationId: row.id,
    to: row.recipient,
    channel: row.channel,
    status: currentStatus(row, now),
    expiresAt: new Date(Number(row.expires_at)).toISOString(),
    sendAttempts: Number(row.send_attempts),
    attemptsLeft: Number(row.attempts_left),
    createdAt: new Date(Number(row.created_at)).toISOString(),
  };
}

/** Its status now: a pending one past its end reads `expired` before the sweep (expiry.ts) writes it. */
function currentStatus(row: Verification, now: number): Verification['status'] {
  return row.status === 'pending' && Number(row.expires_at) <= now ? 'expired' : row.status;
}

/**
 * Whether `error` is the 429 of a number's prefix over the account's prefixLimit, which the route
 * counts as blocked: the one 429 here that names a field (it crosses SQLite's thread as a plain AppError).
 */
export const isPrefixRefusal = (error: unknown): boolean =>
  error instanceof AppError && error.statusCode === 429 && error.errors[0]?.field === 'to';

export interface StartVerification {
  id: string;
  accountId: string;
  channel: Verification['channel'];
  to: string;
  country: string;
  prefix: string;
  prefixLimit: number;
  /** The new code's hash (codes.ts). */
  codeHash: string;
  ttlMs: number;
  webhookUrl: string | null;
  /** The code's message, in its channel's passcode lane (sms/prepare.ts, email/prepare.ts). */
  message: { sms: PreparedSms } | { email: PreparedEmail };
  now: number;
}

/**
 * `POST /verify`: a new verification with its code's message; or, to a number with one pending
 * whose last code went RESEND_WAIT_MS ago or more, that one again with the new code (the old
 * one void, its checks left carried over). 429 within RESEND_WAIT_MS, past MOST_SENDS codes to
 * the number or the account's prefixLimit of new verifications to its prefix.
 */
export const startVerification = postProcedure(
  import.meta.url,
  'startVerification',
  async ({ db, dialect }, args: StartVerification) => {
    const trx = db as Transaction<Schema>;
    const { accountId, to, now } = args;
    await queries[dialect].lockKey(trx, `verify:${accountId}:${args.prefix || to}`);
    let pending = await trx
      .selectFrom('verifications')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('recipient', '=', to)
      .where('status', '=', 'pending')
      .orderBy('created_at', 'desc')
      .limit(1)
      .executeTakeFirst();
    if (pending && currentStatus(pending, now) === 'expired') {
      await endVerifications(trx, [pending], 'expired', now);
      pending = undefined;
    }
    if (pending && now - Number(pending.last_sent_at) < RESEND_WAIT_MS) {
      const wait = (Number(pending.last_sent_at) + RESEND_WAIT_MS - now) / 1000;
      throw tooManyRequests(
        `A code went to this number less than 30 s ago: send again after ${Math.ceil(wait)} s.`,
        wait,
      );
    }
    const since = now - LIMIT_WINDOW_MS;
    const sends = await trx
      .selectFrom('verification_sends')
      .select(['at'])
      .where('account_id', '=', accountId)
      .where('recipient', '=', to)
      .where('at', '>', since)
      .orderBy('at')
      .execute();
    if (sends.length >= MOST_SENDS) {
      const wait = (Number(sends[sends.length - MOST_SENDS].at) + LIMIT_WINDOW_MS - now) / 1000;
      throw tooManyRequests(`${MOST_SENDS} codes went to this number in the last 10 minutes: that is the most.`, wait);
    }
    if (!pending && args.prefix !== '') {
      const recent = await trx
        .selectFrom('verifications')
        .select(['created_at'])
        .where('account_id', '=', accountId)
        .where('prefix', '=', args.prefix)
        .where('created_at', '>', since)
        .orderBy('created_at', 'desc')
        .limit(args.prefixLimit)
        .execute();
      if (recent.length >= args.prefixLimit) {
        const wait = (Number(recent[recent.length - 1].created_at) + LIMIT_WINDOW_MS - now) / 1000;
        throw new AppError(429, 'Too many verifications to numbers of this prefix: the fraud guard refused it.', {
          errors: [
            {
              field: 'to',
              message:
                `starts +${args.prefix}, as ${args.prefixLimit} numbers verified in the last 10 minutes did: ` +
                "the account's prefixLimit (PATCH /account, verify)",
            },
          ],
          headers: { 'retry-after': String(Math.max(1, Math.ceil(wait))) },
        });
      }
    }
    if ('sms' in args.message) await writeSms({ db: trx, dialect }, [args.message.sms]);
    else await writeEmail({ db: trx, dialect }, [args.message.email]);
    await trx.insertInto('verification_sends').values({ account_id: accountId, recipient: to, at: now }).execute();
    const expiresAt = now + args.ttlMs;
    let row: Verification;
    if (pending) {
      row = await trx
        .updateTable('verifications')
        .set((eb) => ({
          code_hash: args.codeHash,
          send_attempts: eb('send_attempts', '+', 1),
          last_sent_at: now,
          expires_at: expiresAt,
          webhook_url: args.webhookUrl,
        }))
        .where('id', '=', pending.id)
        .returningAll()
        .executeTakeFirstOrThrow();
    } else {
      row = await trx
        .insertInto('verifications')
        .values({
          id: args.id,
          account_id: accountId,
          channel: args.channel,
          recipient: to,
          country: args.country,
          prefix: args.prefix,
          code_hash: args.codeHash,
          status: 'pending',
          attempts_left: MOST_CHECKS,
          send_attempts: 1,
          last_sent_at: now,
          expires_at: expiresAt,
          webhook_url: args.webhookUrl,
          created_at: now,
          ended_at: null,
        })
        .returningAll()
        .executeTakeFirstOrThrow();
    }
    const { verificationId, channel, status, expiresAt: expires, sendAttempts } = verificationView(row, now);
    return {
      statusCode: 201,
      body: { verificationId, to, channel, status, expiresAt: expires, sendAttempts },
    };
  },
);

/** A refusal by the fraud guard, counted for `GET /verify/stats` in its own transaction. */
export const recordBlocked = procedure(
  import.meta.url,
  'recordBlocked',
  async ({ db }, args: { accountId: string; reason: 'country' | 'prefix'; country: string; now: number }) => {
    await db
      .insertInto('verify_blocked')
      .values({ account_id: args.accountId, reason: args.reason, country: args.country, at: args.now })
      .execute();
  },
);

export interface CheckVerification {
  accountId: string;
  id: string;
  /** The hash the check was compared with, and whether the code matched it. */
  codeHash: string;
  matched: boolean;
  now: number;
}

/**
 * A check's outcome, compared already against the hash read (routes.ts): the right code
 * approves, a wrong one takes an attempt (the last fails the verification). Conditional on the
 * hash, so a code made void by a resend between the read and this write is wrong. Each write is
 * conditional on the row as it is when written, not as it was read: checks at once (on
 * PostgreSQL, in transactions side by side) take one attempt each, and only one of them ends it.
 * Null when there is nothing to check: not the account's, or approved, failed or cancelled, by
 * now or by a check at the same moment.
 */
export const checkVerification = procedure(
  import.meta.url,
  'checkVerification',
  async ({ db }, args: CheckVerification) =>
    db.transaction().execute(async (trx) => {
      const row = await ownVerification(trx, args);
      if (!row) return null;
      const status = currentStatus(row, args.now);
      if (status === 'expired') {
        if (row.status === 'pending') await endVerifications(trx, [row], 'expired', args.now);
        return { status, attemptsLeft: Number(row.attempts_left) };
      }
      if (status !== 'pending') return null;
      if (args.matched && row.code_hash === args.codeHash) {
        const ended = await endVerifications(trx, [row], 'approved', args.now);
        return ended === 0 ? null : { status: 'approved' as const, attemptsLeft: Number(row.attempts_left) };
      }
      const taken = await trx
        .updateTable('verifications')
        .set((eb) => ({ attempts_left: eb('attempts_left', '-', 1) }))
        .where('id', '=', row.id)
        .where('status', '=', 'pending')
        .where('attempts_left', '>', 0)
        .returning('attempts_left')
        .executeTakeFirst();
      if (!taken) return null;
      const left = Number(taken.attempts_left);
      if (left > 0) return { status: 'pending' as const, attemptsLeft: left };
      await endVerifications(trx, [row], 'failed', args.now);
      return { status: 'failed' as const, attemptsLeft: 0 };
    }),
);

/** `POST /verify/{id}/cancel`: the verification cancelled if pending; its row now, or null if not the account's. */
export const cancelVerification = procedure(
  import.meta.url,
  'cancelVerification',
  async ({ db }, args: { accountId: string; id: string; now: number }) =>
    db.transaction().execute(async (trx) => {
      const row = await ownVerification(trx, args);
      if (!row) return null;
      if (row.status !== 'pending') return row;
      const status: 'expired' | 'cancelled' = currentStatus(row, args.now) === 'expired' ? 'expired' : 'cancelled';
      // One ended by a check at the same moment reads as that check left it.
      if ((await endVerifications(trx, [row], status, args.now)) === 0) return ownVerification(trx, args);
      return { ...row, status, ended_at: args.now };
    }),
);

/** The account's verification `id`; undefined if it has none of that id. */
export const ownVerification = (db: Db, args: { accountId: string; id: string }) =>
  db
    .selectFrom('verifications')
    .selectAll()
    .where('id', '=', args.id)
    .where('account_id', '=', args.accountId)
    .executeTakeFirst();

/** At most this many pending verifications past their end are expired a transaction. */
export const EXPIRY_CHUNK = 500;

/** Pending verifications past their end, a chunk, expired with their events; answers how many. */
export const expireVerifications = procedure(
  import.meta.url,
  'expireVerifications',
  async ({ db }, args: { now: number }) =>
    db.transaction().execute(async (trx) => {
      const rows = await trx
        .selectFrom('verifications')
        .selectAll()
        .where('status', '=', 'pending')
        .where('expires_at', '<=', args.now)
        .orderBy('expires_at')
        .limit(EXPIRY_CHUNK)
        .execute();
      await endVerifications(trx, rows, 'expired', args.now);
      // The limit on sends per number looks back LIMIT_WINDOW_MS only.
      await trx
        .deleteFrom('verification_sends')
        .where('at', '<=', args.now - LIMIT_WINDOW_MS)
        .execute();
      return rows.length;
    }),
);

/**
 * Those of `rows` still pending ended with `status`, each posting `verify.status` to its
 * webhookUrl, in the caller's transaction; answers how many it ended. One another transaction
 * ended meanwhile is left as it is, and posts nothing twice.
 */
async function endVerifications(
  trx: Db,
  rows: Verification[],
  status: Exclude<Verification['status'], 'pending'>,
  now: number,
): Promise<number> {
  if (rows.length === 0) return 0;
  const ended = await trx
    .updateTable('verifications')
    .set({ status, ended_at: now })
    .where(
      'id',
      'in',
      rows.map((row) => row.id),
    )
    .where('status', '=', 'pending')
    .returning('id')
    .execute();
  const endedIds = new Set(ended.map((row) => row.id));
  await appendToStreams(
    trx,
    { now: () => now },
    VERIFY_STATUS_TYPE,
    rows
      .filter((row) => endedIds.has(row.id))
      .map((row) => ({
        accountId: row.account_id,
        url: row.webhook_url,
        event: { verificationId: row.id, to: row.recipient, status, at: new Date(now).toISOString() },
      })),
  );
  return ended.length;
}
