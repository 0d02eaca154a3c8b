import { ParseJSONResultsPlugin, type Kysely } from 'kysely';
import type { DialectName } from '../db/dialect.ts';
import { isAnyOf } from '../db/in-json.ts';
import { procedure, type ProcedureDatabase } from '../db/procedure.ts';
import type { Schema, VerificationsTable } from '../db/schema.ts';
import { AppError, notFound, tooManyRequests } from '../errors.ts';
import { outcomeOf, postGroupProcedure, postProcedure, refusalOf } from '../http/idempotency.ts';
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

/**
 * What a group's limits count, read once for the group under its locks: each number's newest
 * pending verification and the times codes went to it, and each prefix's times of new
 * verifications, within the window of the group's earliest start. Each start's writes are
 * kept in it as the start is decided, so the next counts them as written.
 */
interface Counts {
  pending: Map<string, Verification>;
  sends: Map<string, number[]>;
  made: Map<string, number[]>;
}

/** A number's key in Counts, or a prefix's: one account's. */
const keyOf = (accountId: string, value: string) => JSON.stringify([accountId, value]);

function add(map: Map<string, number[]>, key: string, at: number): void {
  const times = map.get(key);
  if (times) times.push(at);
  else map.set(key, [at]);
}

/**
 * The group's Counts: one read whatever its size (queries.ts, `limitRows`), of the pending
 * verifications of its numbers, the codes sent to them and the verifications made to its
 * prefixes since the window of its earliest start. One statement, not three: on PostgreSQL a
 * group's round trips, each a wait for the event loop too, were most of a start's time.
 */
async function countsOf(db: Db, dialect: DialectName, starts: StartVerification[]): Promise<Counts> {
  const numbers = new Map<string, [string, string]>();
  const prefixes = new Map<string, [string, string, number]>();
  for (const { accountId, to, prefix, prefixLimit } of starts) {
    numbers.set(keyOf(accountId, to), [accountId, to]);
    const most = Math.max(prefixLimit, prefixes.get(keyOf(accountId, prefix))?.[2] ?? 0);
    if (prefix !== '') prefixes.set(keyOf(accountId, prefix), [accountId, prefix, most]);
  }
  const statement = queries[dialect].limitRows(db, {
    numbers: [...numbers.values()],
    prefixes: [...prefixes.values()],
    since: Math.min(...starts.map((start) => start.now)) - LIMIT_WINDOW_MS,
    mostSends: MOST_SENDS,
  });
  const [read] = (await db.withPlugin(new ParseJSONResultsPlugin()).executeQuery(statement)).rows;
  const counts: Counts = { pending: new Map(), sends: new Map(), made: new Map() };
  for (const row of read.pending) {
    const key = keyOf(row.account_id, row.recipient);
    const newest = counts.pending.get(key);
    if (!newest || Number(row.created_at) > Number(newest.created_at)) counts.pending.set(key, row);
  }
  for (const send of read.sends) add(counts.sends, keyOf(send.account_id, send.recipient), Number(send.at));
  for (const row of read.made) add(counts.made, keyOf(row.account_id, row.prefix), Number(row.created_at));
  return counts;
}

/** What a start found, its limits passed: the number's verification pending, to send again, or one that ended. */
interface Allowed {
  pending: Verification | undefined;
  /** The number's pending one past its end: expired when the start is written. */
  expired: Verification | undefined;
}

/** A start's limits, as `counts` has them: throws the 429 of the first it breaks. */
function allowed(counts: Counts, args: StartVerification): Allowed {
  const { accountId, to, now } = args;
  const recipient = args.channel === 'email' ? 'address' : 'number';
  let pending = counts.pending.get(keyOf(accountId, to));
  let expired: Verification | undefined;
  if (pending && currentStatus(pending, now) === 'expired') {
    expired = pending;
    pending = undefined;
  }
  if (pending && now - Number(pending.last_sent_at) < RESEND_WAIT_MS) {
    const wait = (Number(pending.last_sent_at) + RESEND_WAIT_MS - now) / 1000;
    throw tooManyRequests(
      `A code went to this ${recipient} less than 30 s ago: send again after ${Math.ceil(wait)} s.`,
      wait,
    );
  }
  const since = now - LIMIT_WINDOW_MS;
  const sends = (counts.sends.get(keyOf(accountId, to)) ?? []).filter((at) => at > since).sort((a, b) => a - b);
  if (sends.length >= MOST_SENDS) {
    const wait = (sends[sends.length - MOST_SENDS] + LIMIT_WINDOW_MS - now) / 1000;
    throw tooManyRequests(
      `${MOST_SENDS} codes went to this ${recipient} in the last 10 minutes: that is the most.`,
      wait,
    );
  }
  if (!pending && args.prefix !== '') {
    const recent = (counts.made.get(keyOf(accountId, args.prefix)) ?? [])
      .filter((at) => at > since)
      .sort((a, b) => b - a)
      .slice(0, args.prefixLimit);
    if (recent.length >= args.prefixLimit) {
      const wait = (recent[recent.length - 1] + LIMIT_WINDOW_MS - now) / 1000;
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

/** A group's writes, gathered as its starts are decided and made once all are. */
interface Writes {
  /** The group's new rows, each as the group leaves it. */
  made: Verification[];
  /** Each resend of a row there before the group, as it leaves it, in order. */
  resent: Verification[];
  expired: Verification[];
  sends: Array<{ account_id: string; recipient: string; at: number }>;
  sms: PreparedSms[];
  email: PreparedEmail[];
}

/** A start its limits allowed, kept in `counts` and `writes`: its verification as written. */
function started(counts: Counts, writes: Writes, args: StartVerification, { pending, expired }: Allowed) {
  const { accountId, to, now } = args;
  const sent = {
    code_hash: args.codeHash,
    last_sent_at: now,
    expires_at: now + args.ttlMs,
    webhook_url: args.webhookUrl,
  };
  let row: Verification;
  if (pending) {
    row = { ...pending, ...sent, send_attempts: Number(pending.send_attempts) + 1 };
    const madeHere = writes.made.indexOf(pending);
    if (madeHere >= 0) writes.made[madeHere] = row;
    else writes.resent.push(row);
  } else {
    row = {
      id: args.id,
      account_id: accountId,
      channel: args.channel,
      recipient: to,
      country: args.country,
      prefix: args.prefix,
      status: 'pending',
      attempts_left: MOST_CHECKS,
      send_attempts: 1,
      created_at: now,
      ended_at: null,
      ...sent,
    };
    writes.made.push(row);
    add(counts.made, keyOf(accountId, args.prefix), now);
  }
  if (expired) writes.expired.push(expired);
  counts.pending.set(keyOf(accountId, to), row);
  add(counts.sends, keyOf(accountId, to), now);
  writes.sends.push({ account_id: accountId, recipient: to, at: now });
  if ('sms' in args.message) writes.sms.push(args.message.sms);
  else writes.email.push(args.message.email);
  return row;
}

/**
 * `POST /verify`s, in the caller's transaction, in order: each a new verification with its
 * code's message; or, to a number with one pending whose last code went RESEND_WAIT_MS ago or
 * more, that one again with the new code (the old one void, its checks left carried over).
 * 429 within RESEND_WAIT_MS, past MOST_SENDS codes to the number or the account's prefixLimit
 * of new verifications to its prefix: that start's Refusal, and the others go on.
 *
 * Every lock is taken first (queries.ts: the prefixes', then the pending verifications'), then
 * what the limits count is read once for the group, and each start is decided in turn against
 * it with the starts before it added, as if each had been written before the next was counted:
 * two to one number go as they would one after the other. The writes follow, each kind one
 * statement for the group (a resend one each), so a group costs about as many round trips as
 * one start. A group's statements go one after another on one connection: run a start at a
 * time, a group of 64 would hold its locks, and the group after it, 64 times as long.
 */
async function startVerifications({ db, dialect }: ProcedureDatabase, starts: StartVerification[]) {
  await queries[dialect].lockKeys(
    db,
    starts.map((start) => `verify:${start.accountId}:${start.prefix || start.to}`),
  );
  await queries[dialect].lockPending(
    db,
    starts.map((start) => [start.accountId, start.to]),
  );
  const counts = await countsOf(db, dialect, starts);
  const writes: Writes = { made: [], resent: [], expired: [], sends: [], sms: [], email: [] };
  const answers = starts.map((start) => {
    let row: Verification;
    try {
      row = started(counts, writes, start, allowed(counts, start));
    } catch (error) {
      if (!(error instanceof AppError)) throw error;
      return refusalOf(error);
    }
    const { verificationId, channel, status, expiresAt, sendAttempts } = verificationView(row, start.now);
    return { statusCode: 201, body: { verificationId, to: start.to, channel, status, expiresAt, sendAttempts } };
  });
  // The rows there before the group first, then what it made with its codes' messages, in one
  // statement on PostgreSQL (messaging/accept.ts, writeSends). A row made and sent again within
  // the group is written once, as it ends (started).
  for (const row of writes.resent) {
    const { code_hash, send_attempts, last_sent_at, expires_at, webhook_url } = row;
    await db
      .updateTable('verifications')
      .set({ code_hash, send_attempts, last_sent_at, expires_at, webhook_url })
      .where('id', '=', row.id)
      .execute();
  }
  const latest = Math.max(...starts.map((start) => start.now));
  await endVerifications(db, writes.expired, 'expired', latest);
  const inserts = [
    ...(writes.made.length > 0 ? [db.insertInto('verifications').values(writes.made)] : []),
    db.insertInto('verification_sends').values(writes.sends),
  ];
  // With whichever channel's messages are written first: every start has one.
  if (writes.sms.length > 0) await writeSms({ db, dialect }, writes.sms, inserts.splice(0));
  if (writes.email.length > 0) await writeEmail({ db, dialect }, writes.email, inserts.splice(0));
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

type Checked = { status: 'approved' | 'pending' | 'failed' | 'expired'; attemptsLeft: number } | null;

/**
 * A check's outcome, compared already against the hash read (routes.ts): the right code
 * approves, a wrong one takes an attempt (the last fails the verification). Conditional on the
 * hash, so a code made void by a resend between the read and this write is wrong. Each write is
 * conditional on the row as it is when written, not as it was read: checks at once (on
 * PostgreSQL, in transactions side by side; or one after the other in a group's) take one
 * attempt each, and only one of them ends it. Null when there is nothing to check: not the
 * account's, or approved, failed or cancelled, by now or by a check at the same moment.
 *
 * This for checks of verifications all different, in the caller's transaction: the approvals in
 * one UPDATE, then the attempts in another (queries.ts), each row's conditions the whole
 * decision, so a group of checks of pending codes costs those two statements (and the events of
 * the verifications they end). The rows are read only for the checks that changed nothing:
 * expired, ended, or never the account's.
 */
async function checkEach(db: Db, dialect: DialectName, checks: CheckVerification[]): Promise<Checked[]> {
  const answers = new Map<string, Checked>();
  const latest = Math.max(...checks.map((check) => check.now));
  const terms = (check: CheckVerification) => ({ id: check.id, account_id: check.accountId, now: check.now });
  const matched = checks.filter((check) => check.matched);
  if (matched.length > 0) {
    const approved = await queries[dialect].approve(
      db,
      matched.map((check) => ({ ...terms(check), code_hash: check.codeHash })),
    );
    for (const row of approved) answers.set(row.id, { status: 'approved', attemptsLeft: Number(row.attempts_left) });
    await postEnded(db, approved, 'approved', latest);
  }
  const wrong = checks.filter((check) => !answers.has(check.id));
  if (wrong.length > 0) {
    const taken = await queries[dialect].takeAttempts(db, wrong.map(terms));
    for (const row of taken) {
      const attemptsLeft = Number(row.attempts_left);
      answers.set(row.id, { status: attemptsLeft > 0 ? 'pending' : 'failed', attemptsLeft });
    }
    await postEnded(
      db,
      taken.filter((row) => row.status === 'failed'),
      'failed',
      latest,
    );
  }
  const rest = checks.filter((check) => !answers.has(check.id));
  if (rest.length > 0) {
    const rows = await db
      .selectFrom('verifications')
      .selectAll()
      .where(
        isAnyOf(
          dialect,
          'id',
          rest.map((check) => check.id),
        ),
      )
      .execute();
    for (const check of rest) {
      const row = rows.find((candidate) => candidate.id === check.id && candidate.account_id === check.accountId);
      if (!row || currentStatus(row, check.now) !== 'expired') continue;
      if (row.status === 'pending') await endVerifications(db, [row], 'expired', check.now);
      answers.set(check.id, { status: 'expired', attemptsLeft: Number(row.attempts_left) });
    }
  }
  return checks.map((check) => answers.get(check.id) ?? null);
}

/**
 * Checks (checkEach) made at once, committed together with whoever else checks meanwhile
 * (db/gathering.ts): one transaction for the group, each check's answer in order. Checks of
 * one verification go in the order they came, one a turn: its first check with the others'
 * first, its second in the next turn, and so on, so each sees the one before it written.
 */
export const checkVerificationGroup = procedure(
  import.meta.url,
  'checkVerificationGroup',
  async ({ db, dialect }, checks: CheckVerification[]) =>
    db.transaction().execute((trx) => checkInTurns(trx, dialect, checks)),
);

/**
 * `POST /verify/{id}/check` with an Idempotency-Key, alone in the transaction that records it:
 * a check sent again, its answer lost, gets that answer again (an approval included), and takes
 * no second attempt.
 */
export const checkVerification = postProcedure(
  import.meta.url,
  'checkVerification',
  async ({ db, dialect }, check: CheckVerification) => {
    const [checked] = await checkInTurns(db, dialect, [check]);
    if (!checked) throw notFound('The pending verification');
    return { statusCode: 200, body: { verificationId: check.id, ...checked } };
  },
);

/** Checks in the caller's transaction, each verification's in the order they came, one a turn. */
async function checkInTurns(trx: Db, dialect: DialectName, checks: CheckVerification[]): Promise<Checked[]> {
  await queries[dialect].lockRows(trx, [...new Set(checks.map((check) => check.id))]);
  const turns: number[][] = [];
  const seen = new Map<string, number>();
  for (const [i, check] of checks.entries()) {
    const turn = seen.get(check.id) ?? 0;
    seen.set(check.id, turn + 1);
    if (turn === turns.length) turns.push([]);
    turns[turn].push(i);
  }
  const answers: Checked[] = [];
  for (const turn of turns) {
    const checked = await checkEach(
      trx,
      dialect,
      turn.map((i) => checks[i]),
    );
    for (const [j, i] of turn.entries()) answers[i] = checked[j];
  }
  return answers;
}

/** `POST /verify/{id}/cancel`: the verification cancelled if pending; its row now, or null if not the account's. */
export const cancelVerification = procedure(
  import.meta.url,
  'cancelVerification',
  async ({ db }, args: { accountId: string; id: string; now: number }) =>
    db.transaction().execute(async (trx) => {
      const row = await ownVerification(trx, args);
      if (!row) return null;
      if (row.status !== 'pending') return row;
      // Past its end it expired, unless a resend moved the end meanwhile; one ended by a check at
      // the same moment reads as that check left it.
      const expired = currentStatus(row, args.now) === 'expired';
      if (!(expired && (await endVerifications(trx, [row], 'expired', args.now)))) {
        await endVerifications(trx, [row], 'cancelled', args.now);
      }
      return ownVerification(trx, args);
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
 * ended meanwhile is left as it is, and posts nothing twice; so is one a resend gave a new end
 * meanwhile, when `status` is expired.
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
    .$if(status === 'expired', (update) => update.where('expires_at', '<=', now))
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

/**
 * `verify.status` of `rows`, ended with `status` by the caller's transaction, posted to each
 * one's webhookUrl: at its ended_at when the row holds it, else at `now`.
 */
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
      event: {
        verificationId: row.id,
        to: row.recipient,
        status,
        at: new Date(Number(row.ended_at ?? now)).toISOString(),
      },
    })),
  );
}
