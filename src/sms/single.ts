import type { Keyring } from '../sealed.ts';
import type { Kysely } from 'kysely';
import type { Clock } from '../clock.ts';
import type { Database } from '../db/database.ts';
import { procedure } from '../db/procedure.ts';
import type { Schema } from '../db/schema.ts';
import { decideWaitingAgain } from '../messaging/accept.ts';
import { erasureKey } from '../messaging/erased-identifiers.ts';
import { compileTemplate } from '../messaging/tags.ts';
import { completeJobs, type Lease } from '../queue/queries.ts';
import { SnoozeJob, type Job, type JobHandler, type JobRun } from '../queue/worker.ts';
import { pauseForTest } from '../messaging/test-pause.ts';
import { appendToStreamsAhead } from '../webhooks/events.ts';
import { UsageTally } from '../messaging/rollup.ts';
import type { SmsSendJob, StoredSmsContent } from './accept.ts';
import { matchWaiting, SMS_STATUS_TYPE, type PartKey, type Receipt } from './receipts.ts';
import { landingPageLinks, withLinkTag } from './links.ts';
import { openedContent } from './sealing.ts';
import { contactProperties, propertyNames, RETRY_LATER_MS, type PageRow } from '../messaging/pipeline.ts';
import type { Outcome, Step } from './queries.ts';
import {
  applyPageReceipts,
  failUnsent,
  keepFirstRefusals,
  openedPage,
  postSmsRefused,
  pageOutcomes,
  recordOutcomes,
  renderPage,
  statusEvents,
  submitSendable,
} from './send.ts';
import type { OutgoingSms, SmsTransport } from './transport.ts';

type Db = Kysely<Schema>;

/** Pages of passcodes a worker sends at once; those claimed meanwhile wait for the next. */
const PAGES_IN_FLIGHT = 3;

/** One job of a gathered page: its send, its claim, and how its run ends. */
interface Waiting {
  sendId: string;
  lease: Lease;
  signal: AbortSignal;
  settle: (outcome: Error | undefined) => void;
}

interface SingleRow extends PageRow {
  send_id: string;
  account_id: string;
  content: string;
  webhook_url: string | null;
}

interface SinglesResults {
  now: number;
  outcomes: Outcome[];
  steps: Step[];
  receipts: Receipt[];
  /** Recipients refused for now: they stay Queued, their jobs snoozed (keepFirstRefusals). */
  refusedForNow: number[];
  /** Each webhook event with its send's account and URL. */
  events: Array<{ accountId: string; url: string | null; event: object }>;
  /** Sends done with this page: Completed, and their jobs with them. */
  done: Array<{ sendId: string; lease: Lease }>;
}

/**
 * A page of singles' results in one transaction: their recipients, history and events, the
 * sends Completed and their jobs gone, so a worker that dies before it sends them all again
 * (at most a page: the jobs claimed together), and one that dies after sends none again.
 */
export const recordSingles = procedure(
  import.meta.url,
  'recordSingles',
  async ({ db, dialect }, page: SinglesResults): Promise<void> => {
    let waiting: PartKey[] = [];
    await db.transaction().execute(async (trx) => {
      const recorded =
        page.outcomes.length > 0 ? await recordOutcomes(trx, dialect, page.now, page.outcomes, page.steps) : page;
      // The events are the steps', one each, in order: each names its recipient's account.
      const written = new Set(recorded.outcomes.map(({ id }) => id));
      const kept = page.events.filter((_, i) => written.has(page.steps[i].recipientId));
      // The page's events before its receipts, and their gathers queued after them, as recordSmsPage's.
      const events = await appendToStreamsAhead(trx, { now: () => page.now }, SMS_STATUS_TYPE, kept);
      const tally = new UsageTally(page.now);
      const accountOf = new Map(page.steps.map((step, i) => [step.recipientId, page.events[i].accountId]));
      if (recorded.outcomes.length > 0) {
        waiting = await applyPageReceipts(trx, dialect, page.now, recorded, page.receipts, {
          tally,
          accountOf: (id) => accountOf.get(id)!,
        });
      }
      await events.queue();
      await keepFirstRefusals(trx, page.now, page.refusedForNow);
      if (page.done.length > 0) {
        await trx
          .updateTable('sends')
          .set({ status: 'Completed', started_at: page.now, completed_at: page.now })
          .where(
            'id',
            'in',
            page.done.map((send) => send.sendId),
          )
          .execute();
        // A job whose lease lapsed meanwhile (another worker may hold it now) is left to its
        // holder, which finds its recipient no longer Queued and completes it: the page's
        // outcomes are recorded, since its messages went, but for one the holder recorded first.
        await completeJobs(
          trx,
          page.done.map((send) => send.lease),
        );
      }
      await tally.write(trx, dialect);
    });
    await matchWaiting(db, dialect, page.now, waiting);
  },
);

/**
 * The sends of passcodes an SMSC refused for now, before they are tried again: each decided
 * again (messaging/accept.ts, decideWaitingAgain), which ends NotSent and posts one whose number was
 * suppressed meanwhile (a STOP, an erasure). Their consent was decided at accept and stands:
 * a Verify code goes without it, and a passcode waits seconds, not a campaign's hours.
 */
export const refuseSuppressedRetries = procedure(
  import.meta.url,
  'refuseSuppressedRetries',
  async ({ db, dialect }, args: { sendIds: string[]; now: number; erasureKey: Buffer }): Promise<void> =>
    db.transaction().execute(async (trx) => {
      for (const sendId of args.sendIds) {
        const send = { sendId, now: args.now, erasureKey: args.erasureKey, consent: false };
        await decideWaitingAgain(trx, dialect, send, postSmsRefused(trx, args.now, sendId));
      }
    }),
);

async function loadSingles(db: Db, sendIds: string[]): Promise<SingleRow[]> {
  return db
    .selectFrom('send_recipients as r')
    .innerJoin('sends as s', 's.id', 'r.send_id')
    .select([
      's.id as send_id',
      's.account_id',
      's.content',
      's.webhook_url',
      'r.id',
      'r.address',
      'r.tags',
      'r.attempts',
      'r.deferred_at',
    ])
    .select((eb) => contactProperties(eb, eb.ref('s.account_id')))
    .where('r.send_id', 'in', sendIds)
    .where('r.status', '=', 'Queued')
    .orderBy('r.id')
    .execute() as Promise<SingleRow[]>;
}

/**
 * The `sms.single` job: an immediate `/sms/single`, a one-time passcode. Its send was
 * settled at accept (recordSms), so there is nothing to expand: the jobs a worker claims
 * together (one claim statement takes every one due, up to the kind's concurrency) are sent
 * as one page — one read, one transport call, one transaction — rather than one send's
 * round trips each. At 500 passcodes a second that is what keeps them at milliseconds.
 */
export function smsSingleHandler(deps: {
  database: Database;
  clock: Clock;
  transport: SmsTransport;
  encryptionKey: Keyring;
  config: { publicUrl: string };
}): JobHandler {
  const { database, clock, transport, encryptionKey, config } = deps;

  /**
   * One recipient's message; a send that cannot be rendered (its sealed content does not
   * open) fails its own job only.
   */
  async function render(
    row: SingleRow,
    names: Map<string, Promise<Map<string, string>>>,
  ): Promise<OutgoingSms | Error> {
    try {
      const send = {
        accountId: row.account_id,
        sendId: row.send_id,
        ...openedContent(JSON.parse(row.content) as StoredSmsContent, row.send_id, encryptionKey),
      };
      // Its landing page link is written before the message exists, as a batch page's are.
      const links =
        send.content.landingPageId === null
          ? null
          : await (await landingPageLinks(database, clock, send, config.publicUrl))([Number(row.id)]);
      const template = compileTemplate(links ? withLinkTag(send.content.body) : send.content.body);
      // Property names are read only for a text with tags and a contact with properties.
      const needsNames = row.properties !== null && template.tags.length > 0;
      if (needsNames && !names.has(row.account_id))
        names.set(row.account_id, propertyNames(database.reads, row.account_id));
      const accountNames = needsNames ? await names.get(row.account_id)! : new Map<string, string>();
      return renderPage(openedPage([row], send, encryptionKey), send, template, accountNames, links)[0];
    } catch (error) {
      return error instanceof Error ? error : new Error(String(error));
    }
  }

  async function sendPage(gathered: Waiting[]): Promise<void> {
    const sendIds = gathered.map((waiting) => waiting.sendId);
    let loaded = await loadSingles(database.reads, sendIds);
    const triedAgain = loaded.filter((row) => row.deferred_at !== null).map((row) => row.send_id);
    if (triedAgain.length > 0) {
      const key = await erasureKey(database.db, encryptionKey);
      await database.call(refuseSuppressedRetries, { sendIds: triedAgain, now: clock.now(), erasureKey: key });
      loaded = await loadSingles(database.reads, sendIds);
    }
    const names = new Map<string, Promise<Map<string, string>>>();
    const rendered = await Promise.all(loaded.map((row) => render(row, names)));
    const failed = new Map(
      loaded.flatMap((row, i) => (rendered[i] instanceof Error ? [[row.send_id, rendered[i]]] : [])),
    );
    const rows = loaded.filter((row) => !failed.has(row.send_id));
    const messages = rendered.filter((message): message is OutgoingSms => !(message instanceof Error));
    const page = gathered.filter((waiting) => !failed.has(waiting.sendId));
    for (const waiting of gathered) if (failed.has(waiting.sendId)) waiting.settle(failed.get(waiting.sendId));
    const signal = AbortSignal.any(page.map((waiting) => waiting.signal));
    const submittedAt = clock.now();
    const results =
      rows.length > 0 ? await submitSendable(transport, messages, signal, submittedAt, { urgent: true }) : [];
    await pauseForTest('sms.submitted');
    const now = clock.now();
    const { outcomes, steps, receipts, refusedForNow } = pageOutcomes(rows, messages, results, submittedAt);
    const recorded = new Set(outcomes.map((outcome) => outcome.id));
    // A send with its message refused for now is tried again later; any other is done, one
    // whose recipient is no longer Queued included (its job has nothing left to do).
    const later = new Set(rows.filter((row) => !recorded.has(Number(row.id))).map((row) => row.send_id));
    const rowOf = new Map(rows.map((row) => [Number(row.id), row]));
    const events = statusEvents(outcomes, steps, now, (id) => rowOf.get(id)!.send_id).map((event, i) => {
      const { account_id: accountId, webhook_url: url } = rowOf.get(steps[i].recipientId)!;
      return { accountId, url, event };
    });
    const done = page.filter((waiting) => !later.has(waiting.sendId)).map(({ sendId, lease }) => ({ sendId, lease }));
    await database.call(recordSingles, { now, outcomes, steps, receipts, refusedForNow, events, done });
    for (const waiting of page) {
      waiting.settle(
        later.has(waiting.sendId)
          ? new SnoozeJob(now + RETRY_LATER_MS, 'the message was refused for now: it is tried again')
          : undefined,
      );
    }
  }

  // Jobs handed over while PAGES_IN_FLIGHT pages are under way wait and make the next page
  // together, as a database's group commit does: under load a page holds every passcode
  // claimed while the one before it was sent, not one round trip each.
  let waiting: Waiting[] = [];
  let inFlight = 0;
  const sendWaiting = () => {
    if (inFlight >= PAGES_IN_FLIGHT || waiting.length === 0) return;
    const page = waiting;
    waiting = [];
    inFlight += 1;
    sendPage(page)
      .catch((error: unknown) => {
        for (const job of page) job.settle(error instanceof Error ? error : new Error(String(error)));
      })
      .finally(() => {
        inFlight -= 1;
        sendWaiting();
      });
  };

  return {
    handle(job: Job, run: JobRun) {
      const { sendId } = job.payload as SmsSendJob;
      return new Promise<'completed'>((resolve, reject) => {
        // Every job of one claim is handed over in the same turn: they make one page.
        if (waiting.length === 0) queueMicrotask(sendWaiting);
        waiting.push({
          sendId,
          lease: run.lease,
          signal: run.signal,
          settle: (outcome) => (outcome ? reject(outcome) : resolve('completed')),
        });
      });
    },
    onDead: (trx: Db, job: Job, error: string) =>
      failUnsent(trx, database.dialect, clock, (job.payload as SmsSendJob).sendId, error),
  };
}
