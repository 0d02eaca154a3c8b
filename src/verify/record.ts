import type { Kysely } from 'kysely';
import { procedure, type ProcedureDatabase } from '../db/procedure.ts';
import type { Schema, VerificationsTable } from '../db/schema.ts';
import { AppError, tooManyRequests } from '../errors.ts';
import { outcomeOf, postGroupProcedure, postProcedure, refusalOf, type Refusal } from '../http/idempotency.ts';
import { writeEmail, type PreparedEmail } from '../email/accept.ts';
import { writeSms, type PreparedSms } from '../sms/accept.ts';
import { appendToStreams } from '../webhooks/events.ts';
import { queries } from './queries.ts';

/**
 * Verify's writes (ARCHITECTURE.md, "Verify (one-time passcodes)"), each one transaction where
 * the data is (db/procedure.ts); starts and checks made at once share one (db/gathering.ts).
 * The limits are counted in the same transaction as the write they guard, after the number's
 * prefix is locked (queries.ts), so they hold across API processes and never fail open.
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

/** What a start found, its limits passed: the number's verification pending, to send again, or one that ended. */
interface Allowed {
  pending: Verification | undefined;
  /** The number's pending one past its end: expired when the start is written. */
  expired: Verification | undefined;
}

/**
 * A start's limits, counted in the caller's transaction under its lock: throws the 429 of
 * the first it breaks, having written nothing, so a refused member leaves its group's
 * transaction as it found it.
 */
async function allowed(db: Db, args: StartVerification): Promise<Allowed> {
  const { accountId, to, now } = args;
  let pending = await db
    .selectFrom('verifications')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('recipient', '=', to)
    .where('status', '=', 'pending')
    .orderBy('created_at', 'desc')
    .limit(1)
    .executeTakeFirst();
  let expired: Verification | undefined;
  if (pending && currentStatus(pending, now) === 'expired') {
    expired = pending;
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
  const sends = await db
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
    const recent = await db
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
  return { pending, expired };
}

/** A start its limits allowed, in the caller's transaction, but for its code's message: its 201. */
async function writeStart(db: Db, args: StartVerification, { pending, expired }: Allowed) {
  const { accountId, to, now } = args;
  if (expired) await endVerifications(db, [expired], 'expired', now);
  await db.insertInto('verification_sends').values({ account_id: accountId, recipient: to, at: now }).execute();
  const expiresAt = now + args.ttlMs;
  let row: Verification;
  if (pending) {
    row = await db
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
    row = await db
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
  return { statusCode: 201, body: { verificationId, to, channel, status, expiresAt: expires, sendAttempts } };
}

/**
 * `POST /verify`s, in the caller's transaction, in order: each a new verification with its
 * code's message; or, to a number with one pending whose last code went RESEND_WAIT_MS ago or
 * more, that one again with the new code (the old one void, its checks left carried over).
 * 429 within RESEND_WAIT_MS, past MOST_SENDS codes to the number or the account's prefixLimit
 * of new verifications to its prefix: that start's Refusal, and the others go on. Every lock
 * is taken first (queries.ts), and each start counts its limits after those before it wrote,
 * so two to one number go as they would one after the other. The messages go last, together:
 * on PostgreSQL one statement.
 */
async function startVerifications({ db, dialect }: ProcedureDatabase, starts: StartVerification[]) {
  await queries[dialect].lockKeys(
    db,
    starts.map((start) => `verify:${start.accountId}:${start.prefix || start.to}`),
  );
  const answers: Array<Awaited<ReturnType<typeof writeStart>> | Refusal> = [];
  const sms: PreparedSms[] = [];
  const email: PreparedEmail[] = [];
  for (const start of starts) {
    let found: Allowed;
    try {
      found = await allowed(db, start);
    } catch (error) {
      if (!(error instanceof AppError)) throw error;
      answers.push(refusalOf(error));
      continue;
    }
    answers.push(await writeStart(db, start, found));
    if ('sms' in start.message) sms.push(start.message.sms);
    else email.push(start.message.email);
  }
  if (sms.length > 0) await writeSms({ db, dialect }, sms);
  if (email.length > 0) await writeEmail({ db, dialect }, email);
  return answers;
}

/**
 * `POST /verify`s without an Idempotency-Key, committed together with whoever else starts
 * meanwhile (db/gathering.ts): one transaction and one commit for the group.
 */
export const startVerificationGroup = postGroupProcedure(import.meta.url, 'startVerificationGroup', startVerifications);

/** `POST /verify` (startVerifications), alone in the transaction that records its key. */
export const startVerification = postProcedure(
  import.meta.url,
  'startVerification',
  async (database, args: StartVerification) => outcomeOf((await startVerifications(database, [args]))[0]),
  { group: startVerificationGroup },
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
 * PostgreSQL, in transactions side by side; or one after the other in a group's) take one
 * attempt each, and only one of them ends it. Null when there is nothing to check: not the
 * account's, or approved, failed or cancelled, by now or by a check at the same moment.
 *
 * The approval and the attempt are each one UPDATE whose conditions are the whole decision, so
 * a check of a pending code costs that statement (and, when it ends the verification, its
 * event); the row is read only when it changed nothing: the verification expired, ended, or
 * was never the account's.
 */
async function checkOne(db: Db, args: CheckVerification) {
  const live = db
    .updateTable('verifications')
    .where('id', '=', args.id)
    .where('account_id', '=', args.accountId)
    .where('status', '=', 'pending')
    .where('expires_at', '>', args.now);
  if (args.matched) {
    const approved = await live
      .set({ status: 'approved', ended_at: args.now })
      .where('code_hash', '=', args.codeHash)
      .returningAll()
      .executeTakeFirst();
    if (approved) {
      await postEnded(db, [approved], 'approved', args.now);
      return { status: 'approved' as const, attemptsLeft: Number(approved.attempts_left) };
    }
  }
  const taken = await live
    .set((eb) => ({ attempts_left: eb('attempts_left', '-', 1) }))
    .where('attempts_left', '>', 0)
    .returningAll()
    .executeTakeFirst();
  if (taken) {
    const left = Number(taken.attempts_left);
    if (left > 0) return { status: 'pending' as const, attemptsLeft: left };
    await endVerifications(db, [taken], 'failed', args.now);
    return { status: 'failed' as const, attemptsLeft: 0 };
  }
  const row = await ownVerification(db, args);
  if (!row || currentStatus(row, args.now) !== 'expired') return null;
  if (row.status === 'pending') await endVerifications(db, [row], 'expired', args.now);
  return { status: 'expired' as const, attemptsLeft: Number(row.attempts_left) };
}

/**
 * Checks (checkOne) made at once, committed together with whoever else checks meanwhile
 * (db/gathering.ts): one transaction for the group, each check's answer in order. They run in
 * the order of their verifications' ids (checks of one verification in the order they came),
 * so two groups on PostgreSQL that share verifications take their rows in one order.
 */
export const checkVerificationGroup = procedure(
  import.meta.url,
  'checkVerificationGroup',
  async ({ db }, checks: CheckVerification[]) =>
    db.transaction().execute(async (trx) => {
      const answers: Array<Awaited<ReturnType<typeof checkOne>>> = [];
      const inOrder = checks.map((check, i) => ({ check, i })).sort((a, b) => compare(a.check.id, b.check.id));
      for (const { check, i } of inOrder) answers[i] = await checkOne(trx, check);
      return answers;
    }),
);

const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

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
  await postEnded(
    trx,
    rows.filter((row) => endedIds.has(row.id)),
    status,
    now,
  );
  return ended.length;
}

/** `verify.status` of `rows`, ended with `status` by the caller's transaction, posted to each one's webhookUrl. */
async function postEnded(
  trx: Db,
  rows: Verification[],
  status: Exclude<Verification['status'], 'pending'>,
  now: number,
): Promise<void> {
  await appendToStreams(
    trx,
    { now: () => now },
    VERIFY_STATUS_TYPE,
    rows.map((row) => ({
      accountId: row.account_id,
      url: row.webhook_url,
      event: { verificationId: row.id, to: row.recipient, status, at: new Date(now).toISOString() },
    })),
  );
}
