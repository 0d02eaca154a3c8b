import type { ProcedureDatabase } from '../db/procedure.ts';
import { outcomeOf, postGroupProcedure, postProcedure } from '../http/idempotency.ts';
import type { StoredRecipient } from '../messaging/recipients.ts';
import { acceptOf, acceptedUnlessGone, namesLists, writeSends, type AcceptWrites } from '../messaging/accept.ts';
import { PRIORITY } from '../queue/queue.ts';
import type { SmsDraft } from './draft.ts';

/** The queue kind that sends one SMS request: expands it, then submits it a page at a time. */
export const SMS_SEND_KIND = 'sms.send';

/**
 * The queue kind of an immediate `/sms/single` (a one-time passcode): settled at accept, so
 * its worker only reads, submits and records, and sent together with the others claimed
 * with it (single.ts).
 */
export const SMS_SINGLE_KIND = 'sms.single';

/** The key of a send's job, whichever its kind: what a cancel finds it by. */
export const sendJobKey = (sendId: string) => `${SMS_SEND_KIND}:${sendId}`;

export interface SmsSendJob {
  sendId: string;
}

/** What a send keeps of its request, for its worker: its text and how it is sent. */
export type SmsContent = Pick<
  SmsDraft,
  | 'kind'
  | 'senderName'
  | 'body'
  | 'tags'
  | 'landingPageId'
  | 'shortener'
  | 'opensInSandbox'
  | 'validUntil'
  | 'smartEncoding'
  | 'localDelivery'
>;

/** sends.content: SmsContent, its body and tags sealed together in `sealed` when isBodyEncrypted (sealing.ts). */
export type StoredSmsContent = Omit<SmsContent, 'body' | 'tags'> &
  (Pick<SmsContent, 'body' | 'tags'> | { sealed: string });

export interface PreparedSms {
  sendId: string;
  accountId: string;
  /** Who the send goes to, when, and where its statuses are posted. */
  draft: Pick<SmsDraft, 'kind' | 'listIds' | 'scheduledAt' | 'webhookUrl'>;
  content: StoredSmsContent;
  recipients: StoredRecipient[];
  now: number;
}

/** The 202 of a request whose writes are committed. */
function accepted({ sendId, draft, now }: PreparedSms) {
  return {
    statusCode: 202,
    body: {
      status: 'Success' as const,
      message: draft.scheduledAt === null ? 'The SMS was queued for sending.' : 'The SMS was scheduled.',
      data: { QueueId: sendId, QueuedTimestamp: now },
    },
  };
}

/**
 * The writes of `/sms/single` and `/sms/batch` requests (SPEC §2.5), in the caller's
 * transaction: each send, its request recipients and its job. An immediate single SMS is a
 * one-time passcode: the highest lane, and stored expanded (its recipient was settled at
 * accept, with its contact). On PostgreSQL all of it is one statement. A request whose list
 * was deleted since its checks is refused as they would have refused it (writeSends).
 */
export async function writeSms(
  { db, dialect }: ProcedureDatabase,
  requests: PreparedSms[],
  alongside: AcceptWrites = [],
) {
  const gone = await writeSends(
    db,
    dialect,
    requests.map((request) => {
      const passcode = request.draft.kind === 'single' && request.draft.scheduledAt === null;
      return acceptOf('sms', request, {
        kind: passcode ? SMS_SINGLE_KIND : SMS_SEND_KIND,
        jobKey: sendJobKey(request.sendId),
        priority: passcode ? PRIORITY.otp : PRIORITY.fanout,
        expanded: passcode,
      });
    }),
    alongside,
  );
  return acceptedUnlessGone(requests, gone, accepted, { what: 'SMS request', field: 'listId' });
}

/**
 * The 202s of requests without an Idempotency-Key, committed together with whoever else
 * posts meanwhile (db/gathering.ts): on PostgreSQL one statement for the group, so a burst
 * of passcodes costs a round trip and a commit per group, not per request. `/sms/single` has
 * groups of its own: a passcode never waits behind a group of campaigns (up to 64 × 1,000
 * recipients, lists locked), nor behind their writes one by one when such a group fails.
 */
export const recordSmsGroup = postGroupProcedure(import.meta.url, 'recordSmsGroup', writeSms, {
  oneStatement: 'postgres',
  needsTransaction: namesLists,
});
export const recordSmsSingleGroup = postGroupProcedure(import.meta.url, 'recordSmsSingleGroup', writeSms, {
  oneStatement: 'postgres',
});

const recordOne = async (database: ProcedureDatabase, request: PreparedSms) =>
  outcomeOf((await writeSms(database, [request]))[0]);

/**
 * The 202 of `/sms/batch` (SPEC §2.5), and of `/sms/single` (recordSmsSingle): the send, its
 * request recipients and its job, committed together.
 */
export const recordSms = postProcedure(import.meta.url, 'recordSms', recordOne, { group: recordSmsGroup });
export const recordSmsSingle = postProcedure(import.meta.url, 'recordSmsSingle', recordOne, {
  group: recordSmsSingleGroup,
});
