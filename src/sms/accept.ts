import { procedure } from '../db/procedure.ts';
import { postProcedure } from '../http/idempotency.ts';
import { requestRecipientsInsert, type StoredRecipient } from '../messaging/recipients.ts';
import { enqueue, enqueueWithWrites, PRIORITY, type NewJob } from '../queue/queue.ts';
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
export type SmsContent = Pick<SmsDraft, 'kind' | 'senderName' | 'body' | 'tags' | 'landingPageId' | 'shortener'>;

/** sends.content: SmsContent, its body and tags sealed together in `sealed` when isBodyEncrypted (sealing.ts). */
export type StoredSmsContent = Omit<SmsContent, 'body' | 'tags'> & (Pick<SmsContent, 'body' | 'tags'> | { sealed: string });

export interface PreparedSms {
  sendId: string;
  accountId: string;
  /** Who the send goes to, when, and where its statuses are posted. */
  draft: Pick<SmsDraft, 'kind' | 'listIds' | 'scheduledAt' | 'webhookUrl'>;
  content: StoredSmsContent;
  recipients: StoredRecipient[];
  now: number;
}

/**
 * The 202 of `/sms/single` and `/sms/batch` (SPEC §2.5): the send, its request recipients and
 * its job, committed together. An immediate single SMS is a one-time passcode: the highest
 * lane, and stored expanded (its recipient was settled at accept, with its contact). On
 * PostgreSQL the three writes are one statement, so a passcode's accept costs one round trip
 * (with no Idempotency-Key, no transaction around it either: postProcedure's `oneStatement`).
 */
export const recordSms = postProcedure(import.meta.url, 'recordSms', async ({ db, dialect }, { sendId, accountId, draft, content, recipients, now }: PreparedSms) => {
  const passcode = draft.kind === 'single' && draft.scheduledAt === null;
  const send = db.insertInto('sends').values({
    id: sendId,
    account_id: accountId,
    channel: 'sms',
    status: draft.scheduledAt === null ? 'Queued' : 'Scheduled',
    content: JSON.stringify(content),
    list_ids: JSON.stringify(draft.listIds),
    webhook_url: draft.webhookUrl,
    scheduled_at: draft.scheduledAt,
    expanded: passcode,
    created_at: now,
    started_at: null,
    completed_at: null,
  });
  const ownRecipients = recipients.length > 0 ? requestRecipientsInsert(dialect, sendId, now, recipients) : undefined;
  const job: NewJob = {
    kind: passcode ? SMS_SINGLE_KIND : SMS_SEND_KIND,
    payload: { sendId } satisfies SmsSendJob,
    accountId,
    runAt: draft.scheduledAt ?? now,
    idempotencyKey: sendJobKey(sendId),
    maxAttempts: 10,
    priority: passcode ? PRIORITY.otp : PRIORITY.fanout,
  };
  if (dialect === 'postgres') {
    await enqueueWithWrites(db, job, ownRecipients ? [send, ownRecipients] : [send]);
  } else {
    await send.execute();
    await ownRecipients?.execute(db);
    await enqueue(db, job);
  }
  return {
    statusCode: 202,
    body: {
      status: 'Success' as const,
      message: draft.scheduledAt === null ? 'The SMS was queued for sending.' : 'The SMS was scheduled.',
      data: { QueueId: sendId, QueuedTimestamp: now },
    },
  };
}, { oneStatement: 'postgres' });

/**
 * `DELETE /sms/{queueId}`: cancels a send that has not started (its recipients Cancelled, its
 * job gone); answers what the route says: cancelled, not the account's, or already sending.
 * A send has started once a worker claimed its job: an immediate single is never marked
 * Sending (it goes from Queued to Completed in one write), so its waiting job is what tells.
 */
export const cancelSms = procedure(import.meta.url, 'cancelSms', async ({ db }, args: { accountId: string; sendId: string; now: number }): Promise<'cancelled' | 'not found' | 'started'> =>
  db.transaction().execute(async (trx) => {
    const send = await trx.selectFrom('sends').select('status').where('id', '=', args.sendId).where('account_id', '=', args.accountId).where('channel', '=', 'sms').executeTakeFirst();
    if (!send) return 'not found';
    if (send.status !== 'Queued' && send.status !== 'Scheduled') return 'started';
    const waiting = await trx.deleteFrom('jobs').where('idempotency_key', '=', sendJobKey(args.sendId)).where('state', '=', 'ready').executeTakeFirst();
    if (Number(waiting.numDeletedRows) === 0) return 'started';
    await trx.updateTable('sends').set({ status: 'Cancelled', completed_at: args.now }).where('id', '=', args.sendId).execute();
    await trx.updateTable('send_recipients').set({ status: 'Cancelled', updated_at: args.now }).where('send_id', '=', args.sendId).where('status', '=', 'Queued').execute();
    return 'cancelled';
  }),
);
