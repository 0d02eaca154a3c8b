import type { LocalDelivery } from '../messaging/schedule.ts';
import type { ProcedureDatabase } from '../db/procedure.ts';
import { outcomeOf, postGroupProcedure, postProcedure } from '../http/idempotency.ts';
import type { StoredRecipient } from '../messaging/recipients.ts';
import { acceptOf, acceptedUnlessGone, namesLists, writeSends, type AcceptWrites } from '../messaging/accept.ts';
import { PRIORITY } from '../queue/queue.ts';
import type { EmailParty } from './render.ts';
import type { EmailDraft } from './validate.ts';

/** The queue kind that sends one email batch: expands it, then renders and hands it over a page at a time. */
export const EMAIL_SEND_KIND = 'email.send';

/**
 * The queue kind of a one-message email in the passcode lane (a Verify code): the same work as a
 * batch's, registered apart so that it never waits behind campaigns' pages.
 */
export const EMAIL_SINGLE_KIND = 'email.single';

/** What the sandbox's sealed copy of a Verify code's message is bound to. */
export const sandboxRawPlace = (messageId: string) => `sandbox_email.raw:${messageId}`;

/** The key of a batch's job: what a cancel finds it by. */
export const emailJobKey = (sendId: string) => `${EMAIL_SEND_KIND}:${sendId}`;

export interface EmailSendJob {
  sendId: string;
}

/**
 * sends.content of an email batch: what its worker renders. `html` is the batch's own
 * (emailBody) or its campaign's as it was when the batch was accepted; `links` the URLs its
 * tracked links lead to, by index, which a click's token names (kept after retention, so
 * links keep working): found by the send job's compile and written before its first message
 * goes out (send.ts), so the request's thread never parses the HTML.
 */
export interface EmailSendContent {
  from: EmailParty;
  replyTo?: EmailParty;
  subject: string;
  preheader?: string;
  html: string;
  campaignId: string | null;
  links?: string[];
  /** deliverInRecipientTimeZone's time on each recipient's clock (messaging/schedule.ts). */
  localDelivery?: LocalDelivery;
  /**
   * A Verify code (verify/): sent in the passcode lane (EMAIL_SINGLE_KIND), settled at accept,
   * untracked; its recipient's tags, which hold the code, are sealed (messaging/sealed-tags.ts).
   */
  passcode?: true;
  /** When a Verify code expires (epoch ms): a refusal for now is not tried again from then on. */
  validUntil?: number;
}

export interface PreparedEmail {
  sendId: string;
  accountId: string;
  draft: Pick<EmailDraft, 'listIds' | 'scheduledAt' | 'webhookUrl'>;
  content: EmailSendContent;
  recipients: StoredRecipient[];
  now: number;
}

/** The 202 of a batch whose writes are committed. */
function accepted({ sendId, draft, now }: PreparedEmail) {
  return {
    statusCode: 202,
    body: {
      status: true as const,
      message:
        draft.scheduledAt === null ? 'The email batch was queued for sending.' : 'The email batch was scheduled.',
      data: { BatchId: sendId, QueuedTimestamp: now },
    },
  };
}

/**
 * The writes of `/email/batch` requests (SPEC §2.7), in the caller's transaction: each batch,
 * its request recipients and its job. A batch whose list was deleted since its checks is refused
 * as they would have refused it (writeSends).
 */
export async function writeEmail(
  { db, dialect }: ProcedureDatabase,
  requests: PreparedEmail[],
  alongside: AcceptWrites = [],
) {
  const gone = await writeSends(
    db,
    dialect,
    requests.map((request) => {
      const passcode = request.content.passcode === true;
      return acceptOf('email', request, {
        kind: passcode ? EMAIL_SINGLE_KIND : EMAIL_SEND_KIND,
        jobKey: emailJobKey(request.sendId),
        priority: passcode ? PRIORITY.otp : PRIORITY.fanout,
        expanded: passcode,
      });
    }),
    alongside,
  );
  return acceptedUnlessGone(requests, gone, accepted, { what: 'email batch', field: 'sendingDetails.listId' });
}

/**
 * The 202s of batches without an Idempotency-Key, committed together with whoever else posts
 * meanwhile (db/gathering.ts).
 */
export const recordEmailGroup = postGroupProcedure(import.meta.url, 'recordEmailGroup', writeEmail, {
  oneStatement: 'postgres',
  needsTransaction: namesLists,
});

/** The 202 of `/email/batch` (SPEC §2.7): the batch, its request recipients and its job, committed together. */
export const recordEmail = postProcedure(
  import.meta.url,
  'recordEmail',
  async (database, request: PreparedEmail) => outcomeOf((await writeEmail(database, [request]))[0]),
  { group: recordEmailGroup },
);
