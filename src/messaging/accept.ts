import { randomFillSync } from 'node:crypto';
import type { Kysely } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import type { DialectName } from '../db/database.ts';
import { procedure } from '../db/procedure.ts';
import { sendRejected } from '../errors.ts';
import { refusalOf, type Refusal } from '../http/idempotency.ts';
import type { Schema } from '../db/schema.ts';
import { lockNamedLists } from '../crm/queries.ts';
import { defaultListId } from '../crm/setup.ts';
import type { NewJob } from '../queue/queue.ts';
import { appendWebhookEvents } from '../webhooks/events.ts';
import type { PageRow } from './pipeline.ts';
import { queries, type AcceptWrites } from './queries.ts';
import { pauseForTest } from './test-pause.ts';
import { hasEndpoints } from '../webhooks/endpoints.ts';
import { UsageTally } from './rollup.ts';
import {
  expandRecipients,
  refusedInRange,
  releaseDueRecipients,
  requestRecipientsInsert,
  unknownLists,
  type Channel,
  type StoredRecipient,
} from './recipients.ts';

/**
 * A send's beginning, whatever its channel (MESSAGING.md): accepted with its request
 * recipients and its job in one transaction; cancelled while it waits; started by its job,
 * expanded a range at a time with its checkpoint, up to its first page. pipeline.ts sends
 * the pages, reads.ts reads the send back.
 */

export type { AcceptWrites };

type Db = Kysely<Schema>;

/**
 * A new send's id (its QueueId or BatchId): a UUID of version 7 (RFC 9562), its first 48 bits
 * the time and 74 of the rest random. Time-ordered, a new send's rows go at the right-hand end
 * of every index keyed by it (the send, its recipients, its job, its submits) rather than on a
 * random page of each, so a commit writes fewer pages, on both databases. Still unguessable,
 * which message-ids.ts counts on. Its random bytes come from a pool: uuid asks Web Crypto for
 * 16 bytes a call (16 µs under load in a profile, 3 % of the main thread's time per passcode).
 */
export const newSendId = (): string => uuidv7({ random: randomBytes16() });

const randomPool = Buffer.alloc(4096);
let randomPoolAt = randomPool.length;

function randomBytes16(): Uint8Array {
  if (randomPoolAt === randomPool.length) {
    randomFillSync(randomPool);
    randomPoolAt = 0;
  }
  randomPoolAt += 16;
  return randomPool.subarray(randomPoolAt - 16, randomPoolAt);
}

/** A send as it is accepted. `content`: the channel's request as its worker reads it, in JSON. */
export interface NewSend {
  id: string;
  accountId: string;
  channel: Channel;
  content: string;
  listIds: string[];
  webhookUrl: string | null;
  /** Epoch ms; null = now. */
  scheduledAt: number | null;
  /** Stored with its recipients settled already (an immediate single SMS). */
  expanded: boolean;
  now: number;
}

/** An accepted request's writes: the send, its own recipients, and the job that sends it. */
export interface Accept {
  send: NewSend;
  recipients: StoredRecipient[];
  job: NewJob;
}

/** What an accepted request of any channel holds: its send, whom to, and its content as its worker reads it. */
export interface PreparedSend {
  sendId: string;
  accountId: string;
  draft: { listIds: string[]; scheduledAt: number | null; webhookUrl: string | null };
  content: unknown;
  recipients: StoredRecipient[];
  now: number;
}

/**
 * A prepared request's writes: its send and its job of `kind` under `jobKey`, in `priority`'s
 * lane, due at its schedule. `expanded`: its recipients are settled already (an immediate
 * single SMS).
 */
export function acceptOf(
  channel: Channel,
  { sendId, accountId, draft, content, recipients, now }: PreparedSend,
  job: { kind: string; jobKey: string; priority: number; expanded: boolean },
): Accept {
  return {
    send: {
      id: sendId,
      accountId,
      channel,
      content: JSON.stringify(content),
      listIds: draft.listIds,
      webhookUrl: draft.webhookUrl,
      scheduledAt: draft.scheduledAt,
      expanded: job.expanded,
      now,
    },
    recipients,
    job: {
      kind: job.kind,
      payload: { sendId },
      accountId,
      now,
      runAt: draft.scheduledAt ?? now,
      idempotencyKey: job.jobKey,
      maxAttempts: 10,
      priority: job.priority,
    },
  };
}

/**
 * The writes of accepts, one request's or a group's (db/gathering.ts), in the caller's
 * transaction: the sends, their request recipients and their jobs. On PostgreSQL they are one
 * statement, so a group costs one round trip (two when one names lists, in a transaction).
 *
 * `alongside`: inserts of the caller's own that go first, in the same statement on PostgreSQL.
 *
 * Answers, for each accept, the lists it names that are gone since its checks found them (a
 * DELETE /lists/{listId} in between): such an accept is not written, and the caller refuses it
 * as its checks would have. Those that name lists keep them locked until the transaction ends
 * (crm/queries.ts, lockNamedLists), so a list is never deleted under a send that will expand it.
 */
export async function writeSends(
  db: Db,
  dialect: DialectName,
  accepts: Accept[],
  alongside: AcceptWrites = [],
): Promise<string[][]> {
  const gone = await goneLists(db, dialect, accepts);
  const kept = accepts.filter((_, i) => gone[i].length === 0);
  if (kept.length > 0) await insertAccepts(db, dialect, kept, alongside);
  else for (const write of alongside) await write.execute(db);
  return gone;
}

/** Whether a request names lists: its group is then written in a transaction, which holds them (writeSends). */
export const namesLists = (request: { draft: { listIds: string[] } }): boolean => request.draft.listIds.length > 0;

/**
 * Each request's answer once writeSends has written the group: its own (a 202), or, where lists
 * it names went since its checks (`gone`), the 422 those checks give: `what` the channel calls
 * its request, `field` its lists' field.
 */
export function acceptedUnlessGone<R, O>(
  requests: R[],
  gone: string[][],
  accepted: (request: R) => O,
  names: { what: string; field: string },
): Array<O | Refusal> {
  return requests.map((request, i) =>
    gone[i].length === 0 ? accepted(request) : refusalOf(sendRejected(names.what, unknownLists(gone[i], names.field))),
  );
}

async function goneLists(db: Db, dialect: DialectName, accepts: Accept[]): Promise<string[][]> {
  const named = [...new Set(accepts.flatMap(({ send }) => send.listIds))];
  if (named.length === 0) return accepts.map(() => []);
  const owners = new Map((await lockNamedLists(db, dialect, named)).map((list) => [list.id, list.account_id]));
  return accepts.map(({ send }) => send.listIds.filter((id) => owners.get(id) !== send.accountId));
}

async function insertAccepts(db: Db, dialect: DialectName, accepts: Accept[], alongside: AcceptWrites) {
  const rows = db.insertInto('sends').values(
    accepts.map(({ send }) => ({
      id: send.id,
      account_id: send.accountId,
      channel: send.channel,
      status: send.scheduledAt === null ? 'Queued' : 'Scheduled',
      content: send.content,
      list_ids: JSON.stringify(send.listIds),
      webhook_url: send.webhookUrl,
      scheduled_at: send.scheduledAt,
      expanded: send.expanded,
      created_at: send.now,
      started_at: null,
      completed_at: null,
    })),
  );
  const withRecipients = accepts.filter((accept) => accept.recipients.length > 0);
  const ownRecipients =
    withRecipients.length > 0
      ? requestRecipientsInsert(
          dialect,
          withRecipients.map(({ send, recipients }) => ({ sendId: send.id, now: send.now, recipients })),
        )
      : undefined;
  const jobs = accepts.map((accept) => accept.job);
  await queries[dialect].writeAccepts(db, [...alongside, rows, ...(ownRecipients ? [ownRecipients] : [])], jobs);
}

/**
 * `DELETE /sms/{queueId}`, `DELETE /email/batch/{batchId}`: cancels a send that has not started
 * (its recipients Cancelled, its job gone, found by `jobKey`); answers what the route says:
 * cancelled, not the account's, or already sending. A send has started once a worker claimed
 * its job: an immediate single SMS is never marked Sending (it goes from Queued to Completed
 * in one write), so its waiting job is what tells. A send Sending only for recipients held by
 * quiet hours is cancelled too (cancelHeld).
 */
export const cancelSend = procedure(
  import.meta.url,
  'cancelSend',
  async (
    { db, dialect },
    args: { accountId: string; channel: Channel; sendId: string; jobKey: string; now: number },
  ): Promise<'cancelled' | 'not found' | 'started'> => {
    try {
      return await db.transaction().execute(async (trx) => {
        const send = await trx
          .selectFrom('sends')
          .select('status')
          .where('id', '=', args.sendId)
          .where('account_id', '=', args.accountId)
          .where('channel', '=', args.channel)
          .executeTakeFirst();
        if (!send) return 'not found';
        if (send.status === 'Sending') return cancelHeld(trx, dialect, args);
        if (send.status !== 'Queued' && send.status !== 'Scheduled') return 'started';
        const waiting = await trx
          .deleteFrom('jobs')
          .where('idempotency_key', '=', args.jobKey)
          .where('state', '=', 'ready')
          .executeTakeFirst();
        if (Number(waiting.numDeletedRows) === 0) return 'started';
        await trx
          .updateTable('sends')
          .set({ status: 'Cancelled', completed_at: args.now })
          .where('id', '=', args.sendId)
          .execute();
        const cancelled = await trx
          .updateTable('send_recipients')
          .set({ status: 'Cancelled', updated_at: args.now })
          .where('send_id', '=', args.sendId)
          .where('status', '=', 'Queued')
          .executeTakeFirst();
        const tally = new UsageTally(args.now);
        tally.add(args.accountId, args.channel, 'Cancelled', { messages: Number(cancelled.numUpdatedRows) });
        await tally.write(trx, dialect);
        return 'cancelled';
      });
    } catch (error) {
      if (error instanceof StillSending) return 'started';
      throw error;
    }
  },
);

/** Thrown inside cancelSend's transaction, to undo what it did: the send was still sending. */
class StillSending extends Error {}

/**
 * A started send whose job waits only for recipients held by quiet hours (messaging/holds.ts):
 * those Cancelled, its job gone and the send Completed, in the caller's transaction; the
 * recipients already handed over keep their outcomes. Cancelled posts nothing, as a cancelled
 * scheduled send's recipients do. While anything else remains to send (not expanded yet, a
 * page in flight, messages refused for now) or its job is running, it throws StillSending, and
 * cancelSend's transaction undoes all: 'started'. Its job is taken first, so no worker claims
 * it meanwhile.
 */
async function cancelHeld(
  trx: Db,
  dialect: DialectName,
  args: { accountId: string; channel: Channel; sendId: string; jobKey: string; now: number },
): Promise<'cancelled'> {
  const waiting = await trx
    .deleteFrom('jobs')
    .where('idempotency_key', '=', args.jobKey)
    .where('state', '=', 'ready')
    .executeTakeFirst();
  if (Number(waiting.numDeletedRows) === 0) throw new StillSending();
  const send = await trx.selectFrom('sends').select('expanded').where('id', '=', args.sendId).executeTakeFirstOrThrow();
  // Still to send: Queued and not held, or an email refused for now (Deferred, tried again at its retry_at).
  const queued = (held: boolean) =>
    trx
      .selectFrom('send_recipients')
      .select('id')
      .where('send_id', '=', args.sendId)
      .where('due_at', held ? 'is not' : 'is', null)
      .where('status', 'in', held ? ['Queued'] : ['Queued', 'Deferred'])
      .executeTakeFirst();
  if (!send.expanded || (await queued(false)) || !(await queued(true))) throw new StillSending();
  const cancelled = await trx
    .updateTable('send_recipients')
    .set({ status: 'Cancelled', due_at: null, updated_at: args.now })
    .where('send_id', '=', args.sendId)
    .where('due_at', 'is not', null)
    .where('status', '=', 'Queued')
    .executeTakeFirst();
  await trx
    .updateTable('sends')
    .set({ status: 'Completed', completed_at: args.now })
    .where('id', '=', args.sendId)
    .execute();
  const tally = new UsageTally(args.now);
  tally.add(args.accountId, args.channel, 'Cancelled', { messages: Number(cancelled.numUpdatedRows) });
  await tally.write(trx, dialect);
  return 'cancelled';
}

export interface StartedSend {
  accountId: string;
  /** The channel's content, in JSON as accepted. */
  content: string;
  webhookUrl: string | null;
  cursor: number;
  /** The first page to send, read in the same round trip: a one-time passcode's only one. */
  firstPage: PageRow[];
}

/** A send whose refused recipients are posted (startSend's `onRefused`). */
export interface RefusingSend {
  accountId: string;
  webhookUrl: string | null;
}

/**
 * A send's start, in the caller's transaction: until its recipients are all expanded, one
 * range of them (expanded from its lists, consent settled) with the send marked Sending and
 * its checkpoint, answering 'expanding'. Then its held recipients whose time has come,
 * decided again and released (recipients.ts, releaseDueRecipients), and its first page to
 * send (`load`, the channel's page after the cursor, read in the transaction). `onRefused`
 * runs in the same transaction with the recipients each step refused, when the send has a
 * webhook or its account an endpoint. A send cancelled or done answers null.
 */
export async function startSend(
  trx: Db,
  dialect: DialectName,
  args: {
    sendId: string;
    now: number;
    /** The key of erased identifiers' hashes (erased-identifiers.ts), for their suppressions. */
    erasureKey: Buffer;
    /** Whether consent is decided again with suppression for recipients who waited (false: a Verify code's). */
    consent?: boolean;
    load: (accountId: string, cursor: number) => Promise<PageRow[]>;
  },
  onRefused?: (send: RefusingSend, refused: Array<{ address: string; reason: string | null }>) => Promise<void>,
): Promise<StartedSend | 'expanding' | null> {
  const send = await trx.selectFrom('sends').selectAll().where('id', '=', args.sendId).executeTakeFirst();
  if (!send || send.status === 'Cancelled' || send.status === 'Completed') return null;
  const channel = send.channel as Channel;
  const refusing = { accountId: send.account_id, webhookUrl: send.webhook_url };
  // Refusals are looked for only where someone takes them: the send's URL or an endpoint.
  const posting = onRefused !== undefined && (send.webhook_url !== null || (await hasEndpoints(trx, send.account_id)));
  const post = async (refused: Array<{ address: string; reason: string | null }>) => {
    if (posting && refused.length > 0) await onRefused!(refusing, refused);
  };
  const tally = new UsageTally(args.now);
  if (!send.expanded) {
    const through = await expandRecipients(trx, dialect, {
      tally,
      channel,
      sendId: send.id,
      accountId: send.account_id,
      listIds: JSON.parse(send.list_ids) as string[],
      allContactsListId: await defaultListId(trx, send.account_id),
      after: send.expanded_through,
      now: args.now,
      erasureKey: args.erasureKey,
    });
    if (posting) await post(await refusedInRange(trx, channel, send.id, send.expanded_through, through));
    await pauseForTest(`${channel}.expand`);
    await trx
      .updateTable('sends')
      .set({
        expanded: through === null,
        expanded_through: through,
        status: 'Sending',
        started_at: send.started_at ?? args.now,
      })
      .where('id', '=', send.id)
      .execute();
    if (through !== null) {
      await tally.write(trx, dialect);
      return 'expanding';
    }
  }
  await post(
    await releaseDueRecipients(trx, dialect, {
      channel,
      accountId: send.account_id,
      sendId: send.id,
      now: args.now,
      erasureKey: args.erasureKey,
      consent: args.consent ?? true,
      tally,
    }),
  );
  await tally.write(trx, dialect);
  const cursor = Number(send.cursor);
  return {
    accountId: send.account_id,
    content: send.content,
    webhookUrl: send.webhook_url,
    cursor,
    firstPage: await args.load(send.account_id, cursor),
  };
}

/**
 * A send under way has its waiting recipients decided again now, as its start decides them
 * (releaseDueRecipients, with `onRefused`), in the caller's transaction, and nothing read to
 * send: for retries that came due since its run, or its job's, started.
 */
export function decideWaitingAgain(
  trx: Db,
  dialect: DialectName,
  args: { sendId: string; now: number; erasureKey: Buffer; consent: boolean },
  onRefused: NonNullable<Parameters<typeof startSend>[3]>,
): Promise<unknown> {
  return startSend(trx, dialect, { ...args, load: async () => [] }, onRefused);
}

/**
 * A startSend `onRefused` that posts the recipients it refused (NotSent, Dropped) to the
 * send's webhook, in the caller's transaction, each as the channel's `event` of it.
 */
export function postRefused(
  trx: Db,
  args: {
    now: number;
    type: string;
    event: (refused: { address: string; reason: string | null }) => object;
  },
): (send: RefusingSend, refused: Array<{ address: string; reason: string | null }>) => Promise<void> {
  return async (send, refused) => {
    const stream = { accountId: send.accountId, url: send.webhookUrl, type: args.type };
    await appendWebhookEvents(trx, { now: () => args.now }, { ...stream, events: refused.map(args.event) });
  };
}
