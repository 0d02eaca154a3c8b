/** The webhook event type of email events (ARCHITECTURE.md), gathered per account and URL. */
export const EMAIL_EVENTS_TYPE = 'email.events';

/** SPEC §3's email words: every one is posted, and read in a recipient's history. */
export type EmailEventWord =
  | 'Processed'
  | 'Dropped'
  | 'Deferred'
  | 'Bounce'
  | 'Delivered'
  | 'Open'
  | 'Click'
  | 'Spam Report'
  | 'Unsubscribe';

/** One event of an email.events post (ARCHITECTURE.md's body), `at` epoch ms. */
export function emailEvent(e: {
  batchId: string;
  messageId: string | null;
  email: string;
  event: EmailEventWord;
  reason?: string | null;
  url?: string | null;
  reply?: string | null;
  machine?: boolean | null;
  at: number;
}) {
  return {
    batchId: e.batchId,
    messageId: e.messageId,
    email: e.email,
    event: e.event,
    reason: e.reason ?? null,
    url: e.url ?? null,
    reply: e.reply ?? null,
    machine: e.machine ?? null,
    at: new Date(e.at).toISOString(),
  };
}
