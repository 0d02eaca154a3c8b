import type { Kysely } from 'kysely';
import type { Clock } from '../clock.ts';
import type { DialectName } from '../db/database.ts';
import { procedure } from '../db/procedure.ts';
import type { Schema } from '../db/schema.ts';
import { isErased } from '../messaging/erased-identifiers.ts';
import { UsageTally } from '../messaging/rollup.ts';
import { withoutRecipients } from '../messaging/recipients.ts';
import { optOutEmail } from '../messaging/suppressions.ts';
import { decideWaitingAgain, postRefused, startSend, type StartedSend } from '../messaging/accept.ts';
import { holdRecipients, type Hold } from '../messaging/holds.ts';
import {
  completeSend,
  endUnsent,
  loadPage,
  PAGE,
  pageRows,
  RETRY_LATER_MS,
  keptJob,
  type Finish,
  type PageRow,
} from '../messaging/pipeline.ts';
import type { Lease } from '../queue/queries.ts';
import { appendWebhookEvents } from '../webhooks/events.ts';
import { EMAIL_EVENTS_TYPE, emailEvent, type EmailEventWord } from './events.ts';
import { queries, type Outcome, type Step, type Suppressed } from './queries.ts';
import { bounceReply, type EmailResult } from './transport.ts';

/**
 * An email batch's writes once accepted, run where the data is (db/procedure.ts): its start
 * with the expansion's Dropped posted, each page's results, and what is left when its job
 * dies. Kept apart from the rendering (send.ts), whose libraries the database thread need not load.
 */

type Db = Kysely<Schema>;

/** Email recipients still to send: not yet handed over, or refused for now. */
export const PENDING = ['Queued', 'Deferred'] as const;

const MINUTE = 60_000;

/**
 * The waits before each try again of a message refused for now (Deferred), by how many times
 * it was: the first within a minute (greylisting asks for a minute or a few), then longer, so
 * a relay that is down for hours is not hammered; after the last, every 4 hours.
 */
export const RETRY_WAITS_MS = [1, 5, 15, 30, 60, 120, 240].map((minutes) => minutes * MINUTE);

/**
 * A message refused for now this long after its first refusal is given up: a soft Bounce, with the
 * last reply (the 72 hours; RFC 5321 §4.5.4.1 asks for at least 4–5 days of a final MTA, a
 * relay's sender gives up sooner).
 */
export const GIVE_UP_AFTER_MS = 72 * 60 * MINUTE;

/**
 * When a message refused for now the `attempts`-th time (1 for the first) is tried again:
 * after its wait, never later than GIVE_UP_AFTER_MS from its first refusal (`deferredAt`),
 * so its last try is at that moment; null from then on: it is given up. A Verify code is
 * given up too once its next try would come when it has expired (`validUntil`).
 */
export function retryAt(deferredAt: number, attempts: number, now: number, validUntil = Infinity): number | null {
  const giveUpAt = deferredAt + GIVE_UP_AFTER_MS;
  if (now >= giveUpAt) return null;
  const next = Math.min(now + RETRY_WAITS_MS[Math.min(attempts, RETRY_WAITS_MS.length) - 1], giveUpAt);
  return next < validUntil ? next : null;
}

/**
 * A batch's start (messaging/accept.ts): a range of its expansion a call, its Dropped
 * recipients posted (SPEC §3 names the word, unlike SMS's NotSent), then its first page.
 */
export const startEmailSend = procedure(
  import.meta.url,
  'startEmailSend',
  async (
    { db, dialect },
    args: { sendId: string; now: number; erasureKey: Buffer; consent: boolean },
  ): Promise<StartedSend | 'expanding' | null> =>
    db
      .transaction()
      .execute((trx) =>
        startSend(
          trx,
          dialect,
          { ...args, load: (accountId, cursor) => loadEmailPage(trx, accountId, args.sendId, cursor, args.now) },
          postDropped(trx, args.now, args.sendId),
        ),
      ),
);

/**
 * A running batch's retries that came due since its run started, decided again as its start
 * decides them (releaseDueRecipients): one suppressed or unsubscribed meanwhile ends Dropped,
 * posted, rather than go out with the next page.
 */
export const decideDueRetries = procedure(
  import.meta.url,
  'decideDueRetries',
  async ({ db, dialect }, args: { sendId: string; now: number; erasureKey: Buffer; consent: boolean }) => {
    await db
      .transaction()
      .execute((trx) => decideWaitingAgain(trx, dialect, args, postDropped(trx, args.now, args.sendId)));
  },
);

/** A startSend `onRefused` posting the batch's Dropped recipients. */
function postDropped(trx: Db, now: number, batchId: string) {
  return postRefused(trx, {
    now,
    type: EMAIL_EVENTS_TYPE,
    event: (r) =>
      emailEvent({ batchId, messageId: null, email: r.address, event: 'Dropped', reason: r.reason, at: now }),
  });
}

/**
 * The batch's content with its tracked links (accept.ts), written by its send job before its first
 * message goes out.
 */
export const recordEmailLinks = procedure(
  import.meta.url,
  'recordEmailLinks',
  async ({ db }, args: { sendId: string; content: string }): Promise<void> => {
    await db.updateTable('sends').set({ content: args.content }).where('id', '=', args.sendId).execute();
  },
);

/**
 * The next page of an email batch's recipients to hand over: those not yet tried after the
 * cursor, in id order (the send_recipients_page index, as for SMS), then — once those run
 * short — those refused for now whose time has come, the earliest first (the partial
 * send_recipients_retry index: only the waiting are in it). A Deferred recipient was on a
 * page already recorded, so its id is at or below the cursor: the cursor stays a checkpoint.
 */
export async function loadEmailPage(
  db: Db,
  accountId: string,
  sendId: string,
  cursor: number,
  now: number,
): Promise<PageRow[]> {
  const fresh = await loadPage(db, accountId, sendId, cursor, ['Queued']);
  if (fresh.length === PAGE) return fresh;
  const due = await pageRows(db, accountId, sendId)
    .where('r.retry_at', 'is not', null)
    .where('r.retry_at', '<=', now)
    .orderBy('r.retry_at')
    .orderBy('r.id')
    .limit(PAGE - fresh.length)
    .execute();
  return [...fresh, ...(due as PageRow[])];
}

/**
 * An email batch done, in the caller's transaction: Completed and its job with it, unless
 * recipients refused for now wait, or recipients held until their own clock's time
 * (messaging/holds.ts), when it is looked at again at the earliest of their times: from its
 * first recipient again when some are held, since they are behind its cursor.
 */
async function finishEmailSend(trx: Db, sendId: string, now: number, lease: Lease): Promise<Finish> {
  // Released from their hold behind the cursor (a pass stopped halfway, resumed once they were
  // due), or past a page held in part: from the first recipient again, after RETRY_LATER_MS as
  // an SMS send's (a row no pass reads would otherwise keep the job awake).
  const released = await trx
    .selectFrom('send_recipients')
    .select('id')
    .where('send_id', '=', sendId)
    .where('status', '=', 'Queued')
    .where('due_at', 'is', null)
    .executeTakeFirst();
  if (released) {
    await trx.updateTable('sends').set({ cursor: 0 }).where('id', '=', sendId).execute();
    return { retryAt: now + RETRY_LATER_MS, why: 'recipients released behind the cursor' };
  }
  // Each from its own partial index (send_recipients_retry, send_recipients_due): a seek each.
  const earliest = async (column: 'retry_at' | 'due_at') => {
    const row = await trx
      .selectFrom('send_recipients')
      .select((eb) => eb.fn.min(column).as('at'))
      .where('send_id', '=', sendId)
      .where(column, 'is not', null)
      .where('status', 'in', PENDING)
      .executeTakeFirst();
    return row?.at === null || row?.at === undefined ? null : Number(row.at);
  };
  const retry = await earliest('retry_at');
  const due = await earliest('due_at');
  if (retry === null && due === null) return completeSend(trx, sendId, now, lease);
  if (due !== null) await trx.updateTable('sends').set({ cursor: 0 }).where('id', '=', sendId).execute();
  return { retryAt: Math.min(retry ?? Number.POSITIVE_INFINITY, due ?? Number.POSITIVE_INFINITY) };
}

/** Recipients held until their own clock's time (messaging/holds.ts), in a transaction of their own. */
export const holdEmailRecipients = procedure(
  import.meta.url,
  'holdEmailRecipients',
  async ({ db }, args: { held: Hold[]; now: number }): Promise<void> =>
    db.transaction().execute((trx) => holdRecipients(trx, args.held, args.now)),
);

/**
 * The batch done when its last page was recorded earlier, or when it woke with none due
 * (messaging/pipeline.ts's Pending).
 */
export const finishResumedEmailSend = procedure(
  import.meta.url,
  'finishResumedEmailSend',
  async ({ db }, args: { sendId: string; now: number; lease: Lease }): Promise<Finish> =>
    db.transaction().execute((trx) => finishEmailSend(trx, args.sendId, args.now, args.lease)),
);

interface PageResults {
  sendId: string;
  accountId: string;
  webhookUrl: string | null;
  now: number;
  /** The last recipient id of the page: where the next page starts. */
  cursor: number;
  outcomes: Outcome[];
  /** Each event of each message, in order: its history. */
  steps: Array<Step & { status: EmailEventWord }>;
  suppress: Suppressed[];
  events: object[];
  /** The send's job, held by the page's transaction (or it undoes itself). */
  lease: Lease;
  /** The page is the send's last: finish the send and complete its job in the same transaction. */
  last: boolean;
}

/**
 * One page's results in one transaction: the recipients' statuses and history, hard bounces
 * suppressed, their webhook events, and the batch's cursor, so a worker that dies after it
 * resumes with the next page.
 */
export const recordEmailPage = procedure(
  import.meta.url,
  'recordEmailPage',
  async ({ db, dialect }, page: PageResults): Promise<'more' | Finish> =>
    db.transaction().execute(async (trx) => {
      // A recipient an erasure ended since the page was read keeps what it wrote: no step,
      // event or count of the page names it (messaging/erased-identifiers.ts, ERASED_REASON).
      const left = page.outcomes.length > 0 ? await queries[dialect].updateRecipients(trx, page) : new Set<number>();
      // The events are the steps', one each, in order.
      const steps = withoutRecipients(page.steps, left, ({ recipientId }) => recipientId);
      const events = withoutRecipients(page.events, left, (_, i) => page.steps[i].recipientId);
      await appendWebhookEvents(
        trx,
        { now: () => page.now },
        { accountId: page.accountId, url: page.webhookUrl, type: EMAIL_EVENTS_TYPE, events },
      );
      await trx.updateTable('sends').set({ cursor: page.cursor }).where('id', '=', page.sendId).execute();
      const finished = page.last
        ? await finishEmailSend(trx, page.sendId, page.now, page.lease)
        : await keptJob(trx, page.lease);
      const tally = new UsageTally(page.now);
      for (const step of steps) tally.add(page.accountId, 'email', step.status);
      await tally.write(trx, dialect);
      return finished;
    }),
);

/** Why retryAt gave a message up: its hours ran out, or else its code (Verify) expires before a next try. */
const givenUp = (now: number, deferredAt: number) =>
  now - deferredAt >= GIVE_UP_AFTER_MS
    ? `after ${Math.round((now - deferredAt) / 3_600_000)} hours`
    : 'as its code expires before a next try,';

/**
 * What a page's handing over came to, for its record: each message's outcome, its events in
 * order, hard bounces. A refusal for good is a Bounce whose reply says hard (5.1.x: the
 * address is suppressed) or soft (ARCHITECTURE.md); one for now is Deferred until its next
 * try (retryAt), or a soft Bounce once GIVE_UP_AFTER_MS have passed since its first, or its
 * code (Verify) expires before its next try (`validUntil`).
 */
export function pageResults(
  sendId: string,
  now: number,
  handed: Array<{ row: PageRow; messageId: string; result: EmailResult }>,
  validUntil?: number,
): Pick<PageResults, 'outcomes' | 'steps' | 'suppress' | 'events'> {
  const results: Pick<PageResults, 'outcomes' | 'steps' | 'suppress' | 'events'> = {
    outcomes: [],
    steps: [],
    suppress: [],
    events: [],
  };
  for (const { row, messageId, result } of handed) {
    const deferred = result.outcome === 'deferred';
    const attempts = row.attempts + (deferred ? 1 : 0);
    const deferredAt = row.deferred_at === null ? (deferred ? now : null) : Number(row.deferred_at);
    const nextTry = deferred ? retryAt(deferredAt!, attempts, now, validUntil) : null;
    const status: EmailEventWord =
      result.outcome === 'accepted' ? 'Delivered' : deferred && nextTry !== null ? 'Deferred' : 'Bounce';
    const bounce = result.outcome === 'bounced' ? bounceReply(result.reply) : null;
    const hard = bounce?.hard === true;
    const reply =
      result.outcome === 'accepted'
        ? result.reply
        : bounce
          ? bounce.reply
          : nextTry === null
            ? `soft bounce: given up ${givenUp(now, deferredAt!)} and ${attempts} attempts; ` +
              `the last reply: ${result.reply}`
            : result.reply;
    const id = Number(row.id);
    const events: Array<[EmailEventWord, string | null]> = [[status, result.outcome === 'accepted' ? null : reply]];
    // Processed once: when the message was first taken for sending.
    if (row.attempts === 0) events.unshift(['Processed', null]);
    results.outcomes.push({ id, status, messageId, reply, attempts, retryAt: nextTry, deferredAt });
    for (const [event, eventReply] of events) {
      results.steps.push({ recipientId: id, status: event, reply: eventReply });
      results.events.push(
        emailEvent({ batchId: sendId, messageId, email: row.address, event, reply: eventReply, at: now }),
      );
    }
    if (hard) results.suppress.push({ recipientId: id, address: row.address, reason: reply });
  }
  return results;
}

/**
 * A batch's job died: what it had not handed over is Dropped (messaging/pipeline.ts's
 * endUnsent), and the batch Completed.
 */
export async function dropUnsent(
  trx: Db,
  dialect: DialectName,
  clock: Clock,
  sendId: string,
  error: string,
): Promise<void> {
  await endUnsent(trx, dialect, clock, {
    sendId,
    error,
    channel: 'email',
    status: 'Dropped',
    pending: PENDING,
    columns: (reason) => ({ reason, retry_at: null, due_at: null }),
    webhookType: EMAIL_EVENTS_TYPE,
    event: (r, reason, now) =>
      emailEvent({ batchId: sendId, messageId: r.message_id, email: r.address, event: 'Dropped', reason, at: now }),
  });
}

/**
 * User agents of image proxies and link scanners, which open and click what no person read
 * (docs/email.md, "Sending": tracking): an event from one is recorded and posted with `machine: true`, not hidden.
 */
const MACHINE_AGENTS = new RegExp(
  [
    // image proxies
    'GoogleImageProxy|YahooMailProxy|ggpht\\.com',
    // link scanners
    'Barracuda|Mimecast|Proofpoint|urldefense|SafeLinks|Microsoft Office Protection',
    // crawlers and HTTP tools
    'bot\\b|crawler|spider|scanner|preview|curl/|python-requests|Go-http-client|HeadlessChrome',
  ].join('|'),
  'i',
);

/** An open or click this soon after delivery is a machine's: no person reads that fast (issue 13's rule). */
export const MACHINE_WINDOW_MS = 2000;

/**
 * An open of a message, or a click of one of its links, again within this time of the last is
 * not recorded again: a pixel or a link fetched in a loop (anyone holding the email can) would
 * otherwise swell the message's history, its reads and the account's webhooks without bound.
 */
export const REPEAT_WINDOW_MS = 60_000;

export type TrackingEvent = { kind: 'click'; link: number } | { kind: 'open' } | { kind: 'unsubscribe' };

/**
 * A tracking URL followed, in one transaction: the recipient's event in its history and its
 * webhook; an Unsubscribe also sets emailOptIn false on every contact of the account with
 * the address and suppresses it. Answers the click's URL (null for the others), or undefined
 * when the token names no email recipient or link: nothing is recorded then.
 *
 * A machine's request (MACHINE_AGENTS, a HEAD, or within MACHINE_WINDOW_MS of delivery) is
 * recorded flagged for an open or a click; for the unsubscribe link it is not acted on at all
 * (`unconfirmed`): mail scanners follow every link of a message, and would unsubscribe the
 * people they protect. The one-click POST is `confirmed`: scanners do not post.
 */
export const recordTracking = procedure(
  import.meta.url,
  'recordTracking',
  async (
    { db, dialect },
    args: {
      recipientId: number;
      /** The recipient's send, as its token signs it: an id SQLite gave again names another. */
      sendId: string;
      event: TrackingEvent;
      userAgent: string | null;
      head: boolean;
      confirmed: boolean;
      now: number;
    },
  ): Promise<{ url: string | null; outcome: 'recorded' | 'repeated' | 'erased' } | 'unconfirmed' | undefined> =>
    db.transaction().execute(async (trx) => {
      const { event, now } = args;
      const select = trx
        .selectFrom('send_recipients as r')
        .innerJoin('sends as s', 's.id', 'r.send_id')
        .select(['r.id', 'r.address', 'r.message_id', 's.id as send_id', 's.account_id', 's.webhook_url', 's.content'])
        .where('r.id', '=', args.recipientId)
        .where('r.send_id', '=', args.sendId)
        .where('s.channel', '=', 'email');
      // Two unsubscribes of one message at once (its mailto and its one-click POST) take turns.
      const row = await (event.kind === 'unsubscribe'
        ? queries[dialect].lockReportedRow(select)
        : select
      ).executeTakeFirst();
      if (!row) return undefined;
      let url: string | null = null;
      if (event.kind === 'click') {
        url = (JSON.parse(row.content) as { links?: string[] }).links?.[event.link] ?? null;
        if (url === null) return undefined;
      }
      // An erased person's link still leads on, and records nothing: no history, event or
      // suppression names them again (they stay suppressed by their hash).
      if (isErased(row.address)) return { url, outcome: 'erased' };
      const word: EmailEventWord = event.kind === 'click' ? 'Click' : event.kind === 'open' ? 'Open' : 'Unsubscribe';
      const delivered = await trx
        .selectFrom('recipient_history')
        .select('at')
        .where('recipient_id', '=', row.id)
        .where('status', '=', 'Delivered')
        .executeTakeFirst();
      const byMachine =
        args.head ||
        (args.userAgent !== null && MACHINE_AGENTS.test(args.userAgent)) ||
        (delivered !== undefined && now - Number(delivered.at) < MACHINE_WINDOW_MS);
      if (event.kind === 'unsubscribe' && byMachine && !args.confirmed) return 'unconfirmed';
      if (event.kind === 'unsubscribe') {
        // Every press opts the address out: the account may have lifted an earlier one since, at
        // the person's word. The message's Unsubscribe is counted and posted once: another (an
        // auto-reply to the mailto, a client doing both) is not, as a second spam report is not.
        await optOutEmail(trx, dialect, {
          accountId: row.account_id,
          address: row.address,
          reason: 'unsubscribed',
          now,
        });
        if (await hasEvent(trx, row.id, 'Unsubscribe')) return { url, outcome: 'repeated' };
      }
      const machine = event.kind === 'unsubscribe' ? null : byMachine;
      // A person's open is not hidden by a scanner's a moment before, nor the other way round.
      if (event.kind !== 'unsubscribe' && (await repeated(trx, row.id, event.kind, url, byMachine, now))) {
        return { url, outcome: 'repeated' };
      }
      await appendEmailEvent(trx, dialect, row, { event: word, url, machine, at: now });
      return { url, outcome: 'recorded' };
    }),
);

/**
 * Whether the recipient's open, or click of `url`, by a machine or not as `machine` says, was
 * recorded within REPEAT_WINDOW_MS before `now`.
 */
async function repeated(
  trx: Db,
  recipientId: number,
  kind: 'open' | 'click',
  url: string | null,
  machine: boolean,
  now: number,
) {
  const row = await trx
    .selectFrom('recipient_history')
    .select('at')
    .where('recipient_id', '=', recipientId)
    .where('status', '=', kind === 'open' ? 'Open' : 'Click')
    .where('machine', '=', machine)
    .where('at', '>', now - REPEAT_WINDOW_MS)
    .$if(url !== null, (select) => select.where('url', '=', url))
    .executeTakeFirst();
  return row !== undefined;
}

/** Whether the recipient's history holds the event already. */
async function hasEvent(trx: Db, recipientId: number, event: EmailEventWord): Promise<boolean> {
  const row = await trx
    .selectFrom('recipient_history')
    .select('at')
    .where('recipient_id', '=', recipientId)
    .where('status', '=', event)
    .executeTakeFirst();
  return row !== undefined;
}

/** An email recipient as an event after its sending names it (a tracking URL, a report by mail). */
export interface SentEmail {
  id: number;
  address: string;
  message_id: string | null;
  send_id: string;
  account_id: string;
  webhook_url: string | null;
}

/**
 * One event of a sent email, in the caller's transaction: its row in the recipient's history,
 * its webhook event, and its count for the usage rollup.
 */
export async function appendEmailEvent(
  trx: Db,
  dialect: DialectName,
  sent: SentEmail,
  e: {
    event: EmailEventWord;
    at: number;
    reason?: string | null;
    reply?: string | null;
    url?: string | null;
    machine?: boolean | null;
  },
): Promise<void> {
  await trx
    .insertInto('recipient_history')
    .values({
      recipient_id: sent.id,
      status: e.event,
      at: e.at,
      reply: e.reply ?? null,
      url: e.url ?? null,
      machine: e.machine ?? null,
    })
    .execute();
  await appendWebhookEvents(
    trx,
    { now: () => e.at },
    {
      accountId: sent.account_id,
      url: sent.webhook_url,
      type: EMAIL_EVENTS_TYPE,
      events: [emailEvent({ batchId: sent.send_id, messageId: sent.message_id, email: sent.address, ...e })],
    },
  );
  const tally = new UsageTally(e.at);
  tally.add(sent.account_id, 'email', e.event);
  await tally.write(trx, dialect);
}
