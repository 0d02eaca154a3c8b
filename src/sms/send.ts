import type { Keyring } from '../sealed.ts';
import type { Kysely } from 'kysely';
import { erasureKey } from '../messaging/erased-identifiers.ts';
import type { Clock } from '../clock.ts';
import type { Database, DialectName } from '../db/database.ts';
import { procedure } from '../db/procedure.ts';
import type { Schema } from '../db/schema.ts';
import { postRefused, startSend, type StartedSend } from '../messaging/accept.ts';
import {
  endUnsent,
  expandedSend,
  finishSend,
  loadPage,
  pendingByStatus,
  propertyNames,
  rowProperties,
  sendInPages,
  keptJob,
  type Finish,
  type PageChannel,
  type PageRow,
} from '../messaging/pipeline.ts';
import { recipientMessageId } from '../messaging/message-ids.ts';
import { compileTemplate, renderTemplate, type Template } from '../messaging/tags.ts';
import type { Lease } from '../queue/queries.ts';
import type { Job, JobHandler, JobRun } from '../queue/worker.ts';
import { appendWebhookEventsAhead } from '../webhooks/events.ts';
import {
  applyReceipts,
  matchWaiting,
  messageStatus,
  keyOfPart,
  PART_STATUS,
  SMS_STATUS_TYPE,
  smsStatusEvent,
  UNDELIVERED,
  type PartKey,
  type Receipt,
} from './receipts.ts';
import { pauseForTest } from '../messaging/test-pause.ts';
import { UsageTally } from '../messaging/rollup.ts';
import { withoutRecipients } from '../messaging/recipients.ts';
import type { SmsContent, SmsSendJob, StoredSmsContent } from './accept.ts';
import { openedTags } from '../messaging/sealed-tags.ts';
import { openedContent } from './sealing.ts';
import { smartEncoded } from './smart-encoding.ts';
import { LANDING_PAGE_TAG, landingPageLinks, withLinkTag } from './links.ts';
import { isBlank, MAX_PARTS, measure, segment, type Segmented } from './segments.ts';
import { holdRecipients, splitDue, type DueCheck, type Hold } from '../messaging/holds.ts';
import { quietHoursOf } from '../accounts/quiet-hours.ts';
import { offsetMinutes } from '../accounts/time-zone.ts';
import type { RecipientZoneOf } from '../messaging/recipient-zone.ts';
import { queries, type Outcome, type Step } from './queries.ts';
import {
  DEFAULT_SMSC,
  type OutgoingSms,
  type SmsTransport,
  type SubmitOptions,
  type SubmitResult,
} from './transport.ts';

type Db = Kysely<Schema>;

/** SMS recipients still to send: one refused for now stays Queued, to be tried again. */
export const SMS_PENDING = ['Queued'] as const;

/** The webhook's errorCode of a recipient not sent for consent or suppression (ARCHITECTURE.md). */
export const NOT_SENT = 'not_sent';

/**
 * A send's start (messaging/accept.ts): a range of its expansion a call, its NotSent recipients
 * posted as Failed with errorCode not_sent (webhooks carry only the spec's words, as Twilio
 * posts failed, 21610, for an unsubscribed recipient), then its first page.
 */
export const startSmsSend = procedure(
  import.meta.url,
  'startSmsSend',
  async (
    { db, dialect },
    args: { sendId: string; now: number; erasureKey: Buffer },
  ): Promise<StartedSend | 'expanding' | null> =>
    db.transaction().execute((trx) =>
      startSend(
        trx,
        dialect,
        {
          ...args,
          load: (accountId, cursor) => loadPage(trx, accountId, args.sendId, cursor, SMS_PENDING),
        },
        postSmsRefused(trx, args.now, args.sendId),
      ),
    ),
);

/** A startSend `onRefused` posting the send's NotSent recipients as Failed, errorCode not_sent. */
export function postSmsRefused(trx: Db, now: number, queueId: string) {
  return postRefused(trx, {
    now,
    type: SMS_STATUS_TYPE,
    event: (r) =>
      smsStatusEvent({
        queueId,
        messageId: null,
        recipient: r.address,
        status: 'Failed',
        errorCode: NOT_SENT,
        error: `not sent: ${r.reason}`,
        parts: null,
        at: now,
      }),
  });
}

interface PageResults {
  sendId: string;
  accountId: string;
  webhookUrl: string | null;
  now: number;
  /** The last recipient id of the page: where the next page starts. */
  cursor: number;
  outcomes: Outcome[];
  /** Recipients held until a due time (quiet hours, their own clock's time), not handed over (messaging/holds.ts). */
  held: Hold[];
  /** Every status each message went through, in order. */
  steps: Step[];
  /** Receipts the transport gave with its answers that name no part of this page. */
  receipts: Receipt[];
  /** Recipients refused for now: they stay Queued (keepFirstRefusals). */
  refusedForNow: number[];
  /** The send's job, held by the page's transaction (or it undoes itself). */
  lease: Lease;
  /** The page is the send's last: finish the send and complete its job in the same transaction. */
  last: boolean;
}

/**
 * One page's results in one transaction: the recipients' statuses and history, their webhook
 * events, and the send's cursor, so a worker that dies after it resumes with the next page.
 */
export const recordSmsPage = procedure(
  import.meta.url,
  'recordSmsPage',
  async ({ db, dialect }, page: PageResults): Promise<'more' | Finish> => {
    let waiting: PartKey[] = [];
    const tally = new UsageTally(page.now);
    const result = await db.transaction().execute(async (trx) => {
      if (page.outcomes.length > 0) {
        const recorded = await recordOutcomes(trx, dialect, page.now, page.outcomes, page.steps);
        // The page's events are written before its receipts: a receipt already waiting for one
        // of its parts appends a later status, which must not be posted before the Submitted it
        // follows. Their gathers are queued after the outcomes and before the send's job is
        // touched (webhooks/events.ts, EventsAhead, says why).
        // With no per-request URL, still to the account's endpoints (webhooks/endpoints.ts).
        const events = await appendWebhookEventsAhead(
          trx,
          { now: () => page.now },
          {
            accountId: page.accountId,
            url: page.webhookUrl,
            type: SMS_STATUS_TYPE,
            events: statusEvents(recorded.outcomes, recorded.steps, page.now, () => page.sendId),
          },
        );
        waiting = await applyPageReceipts(trx, dialect, page.now, recorded, page.receipts, {
          tally,
          accountOf: () => page.accountId,
        });
        await events.queue();
      }
      await keepFirstRefusals(trx, page.now, page.refusedForNow);
      await holdRecipients(trx, page.held, page.now);
      await trx.updateTable('sends').set({ cursor: page.cursor }).where('id', '=', page.sendId).execute();
      const finished = page.last
        ? await finishSend(trx, page.sendId, page.now, page.lease, SMS_PENDING)
        : await keptJob(trx, page.lease);
      await tally.write(trx, dialect);
      return finished;
    });
    await matchWaiting(db, dialect, page.now, waiting);
    return result;
  },
);

/**
 * The webhook events (ARCHITECTURE.md's sms.status) of steps, one per status each message
 * went through; `sendOf` names the send of a recipient row.
 */
export function statusEvents(
  outcomes: Outcome[],
  steps: Step[],
  now: number,
  sendOf: (recipientId: number) => string,
): object[] {
  const byId = new Map(outcomes.map((o) => [o.id, o]));
  return steps.map(({ recipientId, status }) => {
    const { messageId, parts, error, errorCode, recipient } = byId.get(recipientId)!;
    const queueId = sendOf(recipientId);
    return smsStatusEvent({ queueId, messageId, recipient, status, errorCode, error, parts, at: now });
  });
}

/**
 * Every status each message went through: a message the operator took was Submitted first,
 * whatever its receipts made it since.
 */
function stepsOf(outcomes: Outcome[]): Step[] {
  return outcomes.flatMap(({ id, status, operatorMessageIds }): Step[] =>
    operatorMessageIds.length === 0 || status === 'Submitted'
      ? [{ recipientId: id, status }]
      : [
          { recipientId: id, status: 'Submitted' },
          { recipientId: id, status },
        ],
  );
}

/** A page's outcomes and steps as its record wrote them (recordOutcomes). */
export interface Recorded {
  outcomes: Outcome[];
  steps: Step[];
}

/**
 * Recipients' outcomes, their history and their parts, in the caller's transaction; answers
 * those written. A recipient no longer Queued keeps what was written first: one an erasure
 * ended since the page was read (messaging/erased-identifiers.ts, ERASED_REASON), or one
 * another worker sent and recorded after its job's lease lapsed. Its outcome and steps are
 * left out, so no event, count or part of the page names it twice, and the rest of the page
 * is recorded.
 */
export async function recordOutcomes(
  db: Db,
  dialect: DialectName,
  now: number,
  outcomes: Outcome[],
  steps: Step[],
): Promise<Recorded> {
  const left = await queries[dialect].updateRecipients(db, now, outcomes, steps);
  return {
    outcomes: withoutRecipients(outcomes, left, ({ id }) => id),
    steps: withoutRecipients(steps, left, ({ recipientId }) => recipientId),
  };
}

/**
 * After recordOutcomes, in the same transaction: receipts for other parts, and any that came
 * before these parts were recorded; every status of the steps counted in `usage.tally` (the
 * caller writes it last), each recipient's under its account (`accountOf`).
 */
export async function applyPageReceipts(
  db: Db,
  dialect: DialectName,
  now: number,
  { outcomes, steps }: Recorded,
  receipts: Receipt[],
  usage: { tally: UsageTally; accountOf: (recipientId: number) => string },
): Promise<PartKey[]> {
  const byId = new Map(outcomes.map((o) => [o.id, o]));
  for (const { recipientId, status } of steps) {
    const { parts, encoding, priceMicros, currency, operatorMessageIds } = byId.get(recipientId)!;
    // A message is billed, and so costs, when Submitted: by the parts the operator took (all of
    // them, but for one an SMSC refused after taking some).
    const cost =
      status === 'Submitted' && priceMicros !== null && currency !== null ? { micros: priceMicros, currency } : null;
    const counted = status === 'Submitted' ? operatorMessageIds.length : parts;
    usage.tally.add(usage.accountOf(recipientId), 'sms', status, { parts: counted, encoding, cost });
  }
  const parts = outcomes.flatMap((o) =>
    o.operatorMessageIds.map((id, i) => ({ smsc: o.smsc[i], operatorMessageId: id })),
  );
  return applyReceipts(db, dialect, { now: () => now }, { receipts, parts }, usage.tally);
}

/** A page of a batch as rendered: its rows and their messages, in the same order, and those held back. */
interface RenderedSms {
  rows: PageRow[];
  messages: OutgoingSms[];
  held: Hold[];
}

/** A page handed to the transport: with its answer for each message, and when it was handed. */
interface SubmittedSms extends RenderedSms {
  results: SubmitResult[];
  submittedAt: number;
}

/** A started send as its worker renders it: its content opened, `sealed` if it was sealed. */
type SendingSms = Omit<StartedSend, 'content'> & { sendId: string; content: SmsContent; sealed: boolean };

/** The page with each recipient's own tags opened, for a sealed send. */
export function openedPage(rows: PageRow[], send: { sendId: string; sealed: boolean }, key: Keyring): PageRow[] {
  if (!send.sealed) return rows;
  return rows.map((row) =>
    row.tags === null ? row : { ...row, tags: openedTags(row.tags, send.sendId, row.address, key) },
  );
}

/** What a send renders its texts from, each recipient's with renderText. */
export interface SmsRendering {
  content: SmsContent;
  template: Template;
  /** Contact property names by id (propertyNames), for a template with tags. */
  names: Map<string, string>;
}

/**
 * A recipient's text as it goes, before segmentation: its tags filled (a batch recipient's
 * own, else the single request's top-level ones; then its contact's properties) with its
 * landing page `link`, when the send has one; then smart encoded when the send is, since
 * what it replaces decides the encoding and the parts billed. The dry run renders with it too.
 */
export function renderText(
  row: Pick<PageRow, 'tags' | 'properties'>,
  { content, template, names }: SmsRendering,
  link: string | undefined,
): { text: string; replacedCharacters: number } {
  const properties = template.tags.length > 0 ? rowProperties(row, names) : null;
  const given = row.tags ? (JSON.parse(row.tags) as Record<string, string>) : content.tags;
  const own = link === undefined ? given : { ...given, [LANDING_PAGE_TAG]: link };
  const rendered = template.tags.length > 0 ? renderTemplate(template, { own, properties }) : content.body;
  return content.smartEncoding ? smartEncoded(rendered) : { text: rendered, replacedCharacters: 0 };
}

/** `links`: each row's landing page link, when the send has one. */
export function renderPage(
  rows: PageRow[],
  send: { accountId: string; sendId: string; content: SmsContent; sealed: boolean },
  template: Template,
  names: Map<string, string>,
  links: string[] | null,
): OutgoingSms[] {
  const rendering = { content: send.content, template, names };
  return rows.map((row, i) => {
    const { text, replacedCharacters } = renderText(row, rendering, links?.[i]);
    return {
      accountId: send.accountId,
      sendId: send.sendId,
      messageId: recipientMessageId(send.sendId, Number(row.id)),
      recipient: row.address,
      sender: send.content.senderName,
      segmented: segmentedOrNone(text, Number(row.id) % 256),
      sensitive: send.sealed,
      opensInSandbox: send.content.opensInSandbox === true,
      validUntil: send.content.validUntil,
      replacedCharacters,
    };
  });
}

/**
 * The text in parts; none when its tags left it empty or made it longer than a message can be
 * (the request's body was checked with them unfilled): that one recipient fails
 * (submitSendable), where a throw here failed the page, and the send with it once its job gave
 * up. An empty one is none of 0 units.
 */
function segmentedOrNone(text: string, reference: number): Segmented {
  if (isBlank(text)) return { encoding: 'GSM-7', units: 0, parts: [] };
  try {
    return segment(text, { reference });
  } catch (error) {
    // Measured again only here: segment() measures every text, and a text this long is rare.
    const measured = measure(text);
    if (measured.parts <= MAX_PARTS) throw error;
    return { encoding: measured.encoding, units: measured.units, parts: [] };
  }
}

const TOO_LONG = `not sent: its text, tags filled, takes more than the ${MAX_PARTS} SMS parts a message can have`;
const EMPTY = 'not sent: its text, tags filled, is empty';
const EXPIRED = 'not sent: its code expired before an SMSC took it';

/** Why a message is not submitted at `now`: no parts (segmentedOrNone), or its code expired (Verify). */
function unsendable(message: OutgoingSms, now: number): string | undefined {
  if (message.segmented.parts.length === 0) return message.segmented.units === 0 ? EMPTY : TOO_LONG;
  if (message.validUntil !== undefined && now >= message.validUntil) return EXPIRED;
  return undefined;
}

/**
 * A page's messages submitted at `now`, but for those unsendable, which are refused for good
 * here: each message's result, in the page's order.
 */
export async function submitSendable(
  transport: SmsTransport,
  messages: OutgoingSms[],
  signal: AbortSignal,
  now: number,
  options?: SubmitOptions,
): Promise<SubmitResult[]> {
  const refusals = messages.map((message) => unsendable(message, now));
  const sendable = messages.filter((_, i) => refusals[i] === undefined);
  const submitted = sendable.length > 0 ? await transport.submit(sendable, signal, options) : [];
  let next = 0;
  return messages.map((_, i) => {
    const error = refusals[i];
    return error === undefined ? submitted[next++] : { accepted: false, permanent: true, error, errorCode: null };
  });
}

/**
 * What a page's submit came to: each message's outcome in row order (one refused for now has
 * none: it stays Queued, to be tried again, and is named in `refusedForNow`), the statuses each
 * went through, and the receipts given with the answers that name no part of the page.
 */
export function pageOutcomes(
  rows: PageRow[],
  messages: OutgoingSms[],
  results: SubmitResult[],
  submittedAt: number,
): { outcomes: Outcome[]; steps: Step[]; receipts: Receipt[]; refusedForNow: number[] } {
  const given = new Map(
    results.flatMap((result) => (result.accepted ? (result.receipts ?? []) : [])).map((r) => [keyOfPart(r), r]),
  );
  const outcomes: Outcome[] = [];
  const refusedForNow: number[] = [];
  rows.forEach((row, i) => {
    const outcome = outcomeOf(row, messages[i], results[i], given, submittedAt);
    if (outcome) outcomes.push(outcome);
    else refusedForNow.push(Number(row.id));
  });
  return { outcomes, steps: stepsOf(outcomes), receipts: [...given.values()], refusedForNow };
}

/**
 * Recipients refused for now, in the caller's transaction: the time of each one's first refusal
 * is kept, from which its GIVE_UP_AFTER_MS count (outcomeOf).
 */
export async function keepFirstRefusals(trx: Db, now: number, recipientIds: number[]): Promise<void> {
  if (recipientIds.length === 0) return;
  await trx
    .updateTable('send_recipients')
    .set({ deferred_at: now })
    .where('id', 'in', recipientIds)
    .where('deferred_at', 'is', null)
    .execute();
}

/**
 * How long a message an SMSC keeps refusing for now is tried again (every RETRY_LATER_MS) before
 * it fails, counted from its first refusal (its `deferred_at`), as an email's deferral is: tried
 * for ever, it kept its send Sending and the send's other parts' receipts from expiring.
 */
const GIVE_UP_HOURS = 72;
const GIVE_UP_AFTER_MS = GIVE_UP_HOURS * 3_600_000;

/**
 * A message's outcome, with the receipts its answer came with already applied: written once
 * as its last status, with Submitted before it in its history and events. Receipts in
 * `given` that name a part of this message are taken out of it.
 */
function outcomeOf(
  row: PageRow,
  message: OutgoingSms,
  result: SubmitResult,
  given: Map<string, Receipt>,
  submittedAt: number,
): Outcome | undefined {
  const { encoding, parts } = message.segmented;
  const { messageId } = message;
  const sent = {
    id: Number(row.id),
    messageId,
    parts: parts.length,
    encoding,
    recipient: row.address,
    replacedCharacters: message.replacedCharacters ?? 0,
    submittedAt: (result.accepted && result.submittedAt) || submittedAt,
  };
  if (!result.accepted) {
    const firstRefused = row.deferred_at === null ? null : Number(row.deferred_at);
    const givenUp = firstRefused !== null && submittedAt - firstRefused >= GIVE_UP_AFTER_MS;
    if (!result.permanent && !givenUp) return undefined;
    const { errorCode } = result;
    const error = result.permanent ? result.error : `${result.error} (refused for now for ${GIVE_UP_HOURS} hours)`;
    // Parts an SMSC took before the refusal are recorded and billed: Submitted, then Failed.
    const taken = result.taken ?? [];
    const price = taken.length > 0 ? result.pricePerPart : undefined;
    const took = {
      operatorMessageIds: taken.map((t) => t.operatorMessageId),
      partNumbers: taken.map((t) => t.part),
      partStatuses: taken.map(() => 'Submitted'),
      smsc: taken.map((t) => t.smsc),
      connection: taken.at(-1)?.smsc ?? null,
      priceMicros: price ? price.micros * taken.length : null,
      currency: price ? price.currency : null,
    };
    return { ...sent, status: 'Failed', error, errorCode, ...took };
  }
  const { operatorMessageIds } = result;
  const smsc = result.smsc ?? operatorMessageIds.map(() => DEFAULT_SMSC);
  const partStatuses = operatorMessageIds.map((id, i) => {
    const key = keyOfPart({ smsc: smsc[i], operatorMessageId: id });
    const receipt = given.get(key);
    given.delete(key);
    return (receipt && PART_STATUS[receipt.state]) ?? 'Submitted';
  });
  const status = messageStatus(partStatuses) ?? 'Submitted';
  const failure = status === 'Failed' ? UNDELIVERED : null;
  const errorCode =
    status === 'Failed' ? (result.receipts?.find((r) => PART_STATUS[r.state] === 'Failed')?.errorCode ?? null) : null;
  const price = result.pricePerPart;
  const priced = price
    ? { priceMicros: price.micros * parts.length, currency: price.currency }
    : { priceMicros: null, currency: null };
  const connection = smsc.at(-1) ?? null;
  return { ...sent, status, error: failure, errorCode, operatorMessageIds, partStatuses, smsc, connection, ...priced };
}

/**
 * The `sms.send` job: start (expand) once, then pages of recipients in id order — their
 * landing page links written (when the send has one), rendered, segmented, submitted, their
 * results recorded with the send's cursor — until none is left. Its `channel` is SMS's part
 * of the pipeline (messaging/pipeline.ts's PageChannel).
 */
export function smsSendHandler(deps: {
  database: Database;
  clock: Clock;
  transport: SmsTransport;
  encryptionKey: Keyring;
  config: { publicUrl: string };
  /** A recipient's zone, for quiet hours (messaging/recipient-zone.ts's recipientZone). */
  zoneOf: RecipientZoneOf;
}): JobHandler {
  const { database, clock, transport, encryptionKey, config, zoneOf } = deps;
  return {
    async handle(job: Job, run: JobRun) {
      const { sendId } = job.payload as SmsSendJob;
      const erasure = await erasureKey(database.db, encryptionKey);
      const started = await expandedSend(deps, run, () =>
        database.call(startSmsSend, { sendId, now: clock.now(), erasureKey: erasure }),
      );
      if (!started) return;
      // Opened here, just before rendering: the clear text lives in this job's memory only.
      const send: SendingSms = {
        ...started,
        ...openedContent(JSON.parse(started.content) as StoredSmsContent, sendId, encryptionKey),
        sendId,
      };
      const links =
        send.content.landingPageId === null ? null : await landingPageLinks(database, clock, send, config.publicUrl);
      const template = compileTemplate(links ? withLinkTag(send.content.body) : send.content.body);
      // Quiet hours hold a batch's messages, never a single's (a passcode, Verify's code): as
      // the account has them now, checked at each page's hand-over.
      const account = await database.db
        .selectFrom('accounts')
        .select(['quiet_hours', 'time_zone_offset'])
        .where('id', '=', send.accountId)
        .executeTakeFirst();
      const window = send.content.kind === 'batch' ? quietHoursOf(account?.quiet_hours ?? null) : null;
      const localDelivery = send.content.localDelivery ?? null;
      const holds = window !== null || localDelivery !== null;
      const names =
        template.tags.length > 0 || holds
          ? await propertyNames(database.db, send.accountId)
          : new Map<string, string>();
      const due: DueCheck | null = holds
        ? { window, localDelivery, zoneOf, names, accountOffsetMinutes: offsetMinutes(account!.time_zone_offset) ?? 0 }
        : null;
      const channel: PageChannel<RenderedSms, SubmittedSms> = {
        ...pendingByStatus(deps, send, SMS_PENDING),
        // Read a page at a time: a route change may bring a connection that does not.
        get handsAhead() {
          return transport.skipsAnswered?.() === true;
        },
        render: async (page) => {
          const { go: rows, held } = due ? splitDue(page, due, clock.now()) : { go: page, held: [] };
          const linked = links && rows.length > 0 ? await links(rows.map((row) => Number(row.id))) : null;
          const messages = renderPage(openedPage(rows, send, encryptionKey), send, template, names, linked);
          return { rows, messages, held };
        },
        handOver: async (page, signal) => {
          const submittedAt = clock.now();
          const results =
            page.messages.length > 0 ? await submitSendable(transport, page.messages, signal, submittedAt) : [];
          await pauseForTest('sms.submitted');
          return { ...page, results, submittedAt };
        },
        record: ({ rows, messages, results, held, submittedAt }, { cursor, lease, last }) => {
          const { outcomes, steps, receipts, refusedForNow } = pageOutcomes(rows, messages, results, submittedAt);
          return database.call(recordSmsPage, {
            refusedForNow,
            sendId,
            accountId: send.accountId,
            webhookUrl: send.webhookUrl,
            now: clock.now(),
            cursor,
            outcomes,
            held,
            steps,
            receipts,
            lease,
            last,
          });
        },
      };
      return sendInPages(deps, run, send, channel);
    },
    onDead: (trx: Db, job: Job, error: string) =>
      failUnsent(trx, database.dialect, clock, (job.payload as SmsSendJob).sendId, error),
  };
}

/** A send's job died: what it had not sent is Failed (messaging/pipeline.ts's endUnsent), and the send Completed. */
export async function failUnsent(
  trx: Db,
  dialect: DialectName,
  clock: Clock,
  sendId: string,
  error: string,
): Promise<void> {
  await endUnsent(trx, dialect, clock, {
    sendId,
    error,
    channel: 'sms',
    status: 'Failed',
    pending: ['Queued'],
    // One held by quiet hours waits no more.
    columns: (reason) => ({ error: reason, reason: null, due_at: null }),
    webhookType: SMS_STATUS_TYPE,
    event: (r, reason, now) =>
      smsStatusEvent({
        queueId: sendId,
        messageId: r.message_id,
        recipient: r.address,
        status: 'Failed',
        errorCode: null,
        error: reason,
        parts: r.parts,
        at: now,
      }),
  });
}
