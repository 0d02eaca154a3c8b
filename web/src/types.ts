/** The shapes the console reads, as the API documents them (/docs; ARCHITECTURE.md's reads). */

export interface Session {
  userName: string;
  timeZoneOffset: string;
  locale: string;
  csrfToken: string;
}

export type Totals = Record<string, number>;

export interface SendSummary {
  createdAt: string;
  scheduledAt: string | null;
  status: string;
  totals: Totals;
}

export interface Page<T> {
  items: T[];
  nextCursor: string | null;
}

export interface SmsSummary extends SendSummary {
  queueId: string;
}

export interface EmailSummary extends SendSummary {
  batchId: string;
}

export interface SmsRecipient {
  recipient: string;
  /** Null until the message is made (a recipient not sent to has none). */
  messageId: string | null;
  status: string;
  reason: string | null;
  /** When a Scheduled recipient goes: its send's time, or the time it is held until. */
  dueAt: string | null;
  parts: number | null;
  encoding: string | null;
  /** Characters smart encoding replaced in its text; null until it was made. */
  replacedCharacters: number | null;
  error: string | null;
  /** The SMSC connection that took it; null until submitted. */
  smsc: string | null;
  /** Its parts at its route's price at submit; null for none. */
  price: Money | null;
  history: Array<{ status: string; at: string }>;
  partStatus: Array<{ part: number; operatorMessageId: string | null; status: string }>;
  clicks: Array<{ at: string; userAgent: string | null }>;
}

/** Whether a send's read shows what it said: `sealed` (isBodyEncrypted) and `purged` (retention) show none of it. */
export type ContentState = 'available' | 'sealed' | 'purged';

export interface SmsSend extends SmsSummary {
  partsBilled: number;
  clicks: number;
  contentState: ContentState;
  /** The request's sender name and body, tags unfilled; null unless `available`. */
  content: { senderName: string | null; body: string | null };
  recipients: SmsRecipient[];
  nextCursor: string | null;
}

export interface EmailEvent {
  event: string;
  at: string;
  url?: string;
  reply?: string;
  machine?: boolean;
}

export interface EmailRecipient {
  email: string;
  /** Null for a recipient not sent to (Dropped before its message was made). */
  messageId: string | null;
  status: string;
  reason: string | null;
  /** When a Scheduled recipient goes: its batch's time, or the time it is held until. */
  dueAt: string | null;
  history: EmailEvent[];
}

export interface EmailBatch extends EmailSummary {
  /** Recipients of the whole batch with each event at least once. */
  engagement: { opened: number; clicked: number; unsubscribed: number; complaints: number };
  contentState: ContentState;
  /** As accepted, before each recipient's tags fill it; null unless `available`. */
  content: {
    senderFrom: string | null;
    senderName: string | null;
    subject: string | null;
    preHeaderText: string | null;
    html: string | null;
  };
  recipients: EmailRecipient[];
  nextCursor: string | null;
}

export interface StatsPoint {
  start: string;
  sent: number;
  delivered: number;
  failed: number;
  refused: number;
  opened: number;
  clicked: number;
  unsubscribed: number;
  complaints: number;
}

export interface SmsUsage {
  messages: number;
  parts: { gsm7: number; ucs2: number };
  statuses: Record<string, number>;
}

export interface EmailUsage {
  messages: number;
  statuses: Record<string, number>;
}

/** `{amount, currency}`: a decimal string and its ISO 4217 code. */
export interface Money {
  amount: string;
  currency: string;
}

export interface Usage {
  from: string;
  to: string;
  days: Array<{ date: string; sms: SmsUsage; email: EmailUsage; cost: Money[] }>;
  totals: { sms: SmsUsage; email: EmailUsage; cost: Money[] };
}

/** `GET /verify/stats`: verifications by the day they started, with how they ended; `conversionRate` is 0–1. */
export interface VerifyStats {
  started: number;
  approved: number;
  failed: number;
  expired: number;
  blocked: number;
  blockedBy: { country: number; prefix: number };
  conversionRate: number;
  /** Most started first; a number of no single country is in the totals only. */
  byCountry: Array<{ country: string; started: number; approved: number }>;
}

export interface Contact {
  contactId: number;
  email: string | null;
  mobileCountryCode: string | null;
  mobileNumber: string | null;
  mobileOptIn: boolean;
  emailOptIn: boolean;
  propertyfields: Array<{ propertyid: string; propertyname: string; propertyvalue: string }>;
  listIds: string[];
  createdAt: string;
  updatedAt: string;
}

export interface ContactMessage {
  channel: 'sms' | 'email';
  sendId: string;
  /** Null until the message is handed to its transport. */
  messageId: string | null;
  address: string;
  status: string;
  reason: string | null;
  sentAt: string;
  updatedAt: string;
}

export interface ContactList {
  listId: string;
  name: string;
  createdAt: string;
}

export interface Suppression {
  reason: string;
  createdAt: string;
}

export interface WebhookSecret {
  secret: string;
  previousSecretExpiresAt: string | null;
}

export interface Delivery {
  id: string;
  type: string;
  url: string;
  status: 'pending' | 'delivered' | 'failed';
  attempts: number;
  lastStatusCode: number | null;
  lastError: string | null;
  lastAttemptAt: string | null;
  nextAttemptAt: string | null;
  createdAt: string;
  deliveredAt: string | null;
}

/** An entry of the audit log (GET /audit). */
export interface AuditEntry {
  at: string;
  /** token, apiKey:<apiKeyId>, console or admin. */
  actor: string;
  action: string;
  /** An id, or a person's number or address as its keyed hash; null: the account. */
  target: string | null;
  ip: string | null;
}

export interface ApiKey {
  apiKeyId: string;
  name: string;
  scopes: string[];
  createdAt: string;
  /** Null: it never expires. */
  expiresAt: string | null;
  /** Its last request, to the minute; null until it is used. */
  lastUsedAt: string | null;
}

/** POST /api-keys's answer: the key itself, shown this once. */
export interface CreatedApiKey extends Omit<ApiKey, 'lastUsedAt'> {
  key: string;
}

export interface WebhookEndpoint {
  endpointId: string;
  /** Normalised: scheme and host in lower case, no default port. */
  url: string;
  events: string[];
  createdAt: string;
  /** When its receiver answered 410 Gone: it takes no event since. */
  disabledAt: string | null;
}
