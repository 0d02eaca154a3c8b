import type { ProcedureDatabase } from '../db/procedure.ts';
import { postGroupProcedure, postProcedure } from '../http/idempotency.ts';
import type { StoredRecipient } from '../messaging/recipients.ts';
import { acceptOf, writeSends } from '../messaging/accept.ts';
import { PRIORITY } from '../queue/queue.ts';
import type { EmailParty } from './render.ts';
import type { EmailDraft } from './validate.ts';

/** The queue kind that sends one email batch: expands it, then renders and hands it over a page at a time. */
export const EMAIL_SEND_KIND = 'email.send';

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
 * its request recipients and its job.
 */
async function writeEmail({ db, dialect }: ProcedureDatabase, requests: PreparedEmail[]) {
  await writeSends(
    db,
    dialect,
    requests.map((request) =>
      acceptOf('email', request, {
        kind: EMAIL_SEND_KIND,
        jobKey: emailJobKey(request.sendId),
        priority: PRIORITY.fanout,
        expanded: false,
      }),
    ),
  );
  return requests.map(accepted);
}

/**
 * The 202s of batches without an Idempotency-Key, committed together with whoever else posts
 * meanwhile (db/gathering.ts).
 */
export const recordEmailGroup = postGroupProcedure(import.meta.url, 'recordEmailGroup', writeEmail, {
  oneStatement: 'postgres',
});

/** The 202 of `/email/batch` (SPEC §2.7): the batch, its request recipients and its job, committed together. */
export const recordEmail = postProcedure(
  import.meta.url,
  'recordEmail',
  async (database, request: PreparedEmail) => (await writeEmail(database, [request]))[0],
  { group: recordEmailGroup },
);
