import type { LocalDelivery } from '../messaging/schedule.ts';

/**
 * A send request as the SMS pipeline takes it, once validated and checked against the
 * account: plain data (it crosses to SQLite's thread as a procedure's argument).
 */
export interface SmsDraft {
  /** `/sms/single` (one recipient, the highest lane when immediate) or `/sms/batch`. */
  kind: 'single' | 'batch';
  senderName: string;
  body: string;
  isBodyEncrypted: boolean;
  /** The single request's top-level tags, by tagName as written (`[name]` → value). */
  tags: Record<string, string>;
  /**
   * Request recipients in request order, mobile as E.164 digits; a number given twice keeps its
   * first entry. `contactId`: the contact whose properties fill the tags, when it was settled
   * at accept (an immediate single); otherwise the worker's expansion finds it.
   */
  recipients: Array<{ mobile: string; tags: Record<string, string>; contactId?: number | null }>;
  /** The account's lists to send to, lower-cased, without repeats. */
  listIds: string[];
  /** Epoch ms; null = now. A time in the past is now. */
  scheduledAt: number | null;
  /**
   * A batch's deliverInRecipientTimeZone: the time on each recipient's clock to deliver at,
   * from `scheduledAt`, when the first zone reaches it (messaging/schedule.ts).
   */
  localDelivery?: LocalDelivery;
  landingPageId: string | null;
  /**
   * With a landing page: `url` the shortnerUrl as given (null: the service's own links,
   * PUBLIC_URL/l), `unique` a link per recipient (isUniqueUrl, true by default).
   */
  shortener: { url: string | null; unique: boolean } | null;
  webhookUrl: string | null;
  /** A code Herald made (Verify): sealed, and opened by the account's sandbox read. */
  opensInSandbox?: boolean;
  /** When a code Herald made (Verify) expires (epoch ms): not handed to an SMSC from then on. */
  validUntil?: number;
  /**
   * The account's smart encoding when accepted (sms/smart-encoding.ts): its worker applies it as it
   * renders; off for a send stored without it (before migration 0033).
   */
  smartEncoding?: boolean;
}
