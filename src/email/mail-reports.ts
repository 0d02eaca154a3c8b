import type { HeaderValue, Headers, SimpleParserOptions } from 'mailparser';

/**
 * What a mail Herald receives reports, read with mailparser: a delivery status notification
 * (RFC 3464) or a feedback report (ARF, RFC 5965), each with what it says of the message it is
 * about. Only the report's fields are read here; MIME, encodings and header syntax are mailparser's.
 */

/** The largest report taken, by mail or over HTTP: a DSN or ARF report carries one message, often cut to its head. */
export const MAX_REPORT_BYTES = 10 * 1024 * 1024;

/**
 * How much of a report is read. Its human-readable part, then its delivery-status or feedback
 * part come first, and of the message it carries after them only the head is read: the rest of
 * a large report is dropped unread. Decoding ten megabytes of short text lines took 226 MB of
 * heap, and three such mails at once ran the process out of it.
 */
export const REPORT_BYTES_READ = 1024 * 1024;

/**
 * MIME parts a report may have: a report has three or four, and a mail of nested parts makes
 * every line be compared with each open part's boundary (990 deep, 50 s of CPU for 10 MB).
 * Past it the mail is unparseable.
 */
const MAX_PARTS = 30;

/** What a report says of the message it is about (the original, whole or its headers). */
export interface OriginalMessage {
  /** The envelope sender it was sent with: a VERP return path names its recipient. */
  returnPath: string | null;
  /** Its Message-ID, `<uuid@domain>` for Herald's messages. */
  messageId: string | null;
}

/** One recipient of a DSN (RFC 3464 §2.3) whose delivery failed for good, or was delayed. */
export interface DeliveryFailure {
  action: 'failed' | 'delayed';
  /** The address that failed, without its type (`rfc822;`). */
  finalRecipient: string | null;
  /** The enhanced status code (RFC 3463), `5.1.1`. */
  status: string;
  /** The remote server's words, with their type: `smtp; 550 5.1.1 user unknown`. */
  diagnosticCode: string | null;
}

export type MailReport =
  | { kind: 'dsn'; failures: DeliveryFailure[]; original: OriginalMessage }
  | { kind: 'arf'; feedbackType: string; original: OriginalMessage }
  /** A mail that is neither: an auto-reply, a person's message, spam. */
  | { kind: 'other' }
  | { kind: 'unparseable'; problem: string };

/** RFC 3463: class.subject.detail. */
const ENHANCED_STATUS = /^[245]\.\d{1,3}\.\d{1,3}$/;

/** A field's text whatever mailparser made of it: address fields become objects, structured ones `{value}`. */
function text(headers: Headers, name: string): string | null {
  const value: HeaderValue | undefined = headers.get(name);
  if (typeof value === 'string') return value.trim() || null;
  if (value && typeof value === 'object' && 'text' in value && typeof value.text === 'string')
    return value.text.trim() || null;
  if (value && typeof value === 'object' && 'value' in value && typeof value.value === 'string')
    return value.value.trim() || null;
  return null;
}

/** An address as a report writes it (`rfc822; a@b`, `<a@b>`): the address alone, lower-cased. */
function bareAddress(field: string | null): string | null {
  if (field === null) return null;
  const address = field
    .replace(/^[\w-]+\s*;/, '')
    .trim()
    .replace(/^<|>$/g, '')
    .trim();
  return address === '' ? null : address.toLowerCase();
}

/** mailparser's parser, loaded with the first report: a service that never receives one need not carry it. */
const simpleParser = async (source: string | Buffer, options: SimpleParserOptions) =>
  (await import('mailparser')).simpleParser(source, options);

/**
 * A MIME part's head, at most: a report's heads are a few kilobytes. A head of a megabyte of
 * addresses took 760 ms and 120 MB of heap to read.
 */
const MAX_HEAD_BYTES = 64 * 1024;

const PARSING = {
  maxHeadSize: MAX_HEAD_BYTES,
  skipHtmlToText: true,
  skipTextToHtml: true,
  skipTextLinks: true,
  skipImageLinks: true,
  checksumAlgo: false,
} as const;

/**
 * A block of header fields (a DSN's per-message or per-recipient fields, a feedback report's, a
 * message's head), parsed as a header is.
 */
async function fields(block: string): Promise<Headers> {
  return (await simpleParser(`${withoutTrailingBreaks(block)}\r\n\r\n`, PARSING)).headers;
}

/**
 * The block without the line breaks that end it, found from its end: a regular expression
 * anchored at the end (/(?:\r?\n)+$/) tries each run of breaks in the block, which a stranger's
 * report of many breaks made quadratic (8.5 s for 110 KB).
 */
function withoutTrailingBreaks(block: string): string {
  let end = block.length;
  while (end > 0 && (block[end - 1] === '\n' || block[end - 1] === '\r')) end--;
  return block.slice(0, end);
}

/** The head of a message (a message/rfc822 part or text/rfc822-headers): what precedes its first blank line. */
const head = (message: string) => message.split(/\r?\n\r?\n/, 1)[0];

/**
 * What the report says of the original. A head past MAX_HEAD_BYTES (a relay's thousand
 * Received lines) says nothing here, the report's own fields still do: its recipient's VERP
 * address names the message without it.
 */
async function original(part: string | undefined, reportedFrom: string | null): Promise<OriginalMessage> {
  const headers = part === undefined ? null : await fields(head(part)).catch(() => null);
  return {
    returnPath: reportedFrom ?? (headers ? bareAddress(text(headers, 'return-path')) : null),
    messageId: headers ? text(headers, 'message-id') : null,
  };
}

/**
 * Recipients' groups of a DSN read, at most. Herald sends each message to one recipient, so its
 * DSNs hold one; anyone may send the inbound port a report of a million empty groups, each
 * parsed as a header (some 50 µs).
 */
const MOST_RECIPIENT_GROUPS = 50;

/**
 * A DSN's per-recipient fields (of its first MOST_RECIPIENT_GROUPS) that report a failure or a
 * delay; successes (NOTIFY=SUCCESS) say nothing Herald records.
 */
async function failures(deliveryStatus: string): Promise<DeliveryFailure[]> {
  // RFC 3464 §2.1: the per-message fields, then one group per recipient, separated by blank lines.
  const groups = deliveryStatus
    .split(/\r?\n[ \t]*\r?\n/, MOST_RECIPIENT_GROUPS + 1)
    .slice(1)
    .filter((group) => group.trim() !== '');
  const found: DeliveryFailure[] = [];
  for (const group of groups) {
    const headers = await fields(group);
    const action = text(headers, 'action')?.toLowerCase().split(/[\s(]/, 1)[0];
    const status = text(headers, 'status')?.split(/[\s(]/, 1)[0];
    if ((action !== 'failed' && action !== 'delayed') || status === undefined || !ENHANCED_STATUS.test(status))
      continue;
    found.push({
      action,
      finalRecipient: bareAddress(text(headers, 'final-recipient')),
      status,
      diagnosticCode: text(headers, 'diagnostic-code'),
    });
  }
  return found;
}

/**
 * What a received message reports, read from its first REPORT_BYTES_READ. A multipart/report is
 * known by its parts (report-type is sometimes missing or wrong in the wild): a
 * message/delivery-status part makes a DSN, a message/feedback-report part an ARF report. Never
 * throws: a message mailparser cannot read is `unparseable`, with the reason, for the log. It
 * runs on the report reader's thread (report-reader.ts).
 */
export async function readMailReport(message: Buffer): Promise<MailReport> {
  try {
    // Embedded messages and the report's own parts kept as attachments, not folded into the text.
    const mail = await simpleParser(message.subarray(0, REPORT_BYTES_READ), {
      ...PARSING,
      keepDeliveryStatus: true,
      ignoreEmbedded: true,
      maxChildNodes: MAX_PARTS,
    });
    const part = (type: string) =>
      mail.attachments.find((a) => a.contentType.toLowerCase() === type)?.content.toString('utf8');
    const originalPart = part('message/rfc822') ?? part('text/rfc822-headers');
    const deliveryStatus = part('message/delivery-status');
    if (deliveryStatus !== undefined)
      return { kind: 'dsn', failures: await failures(deliveryStatus), original: await original(originalPart, null) };
    const feedback = part('message/feedback-report');
    if (feedback !== undefined) {
      const report = await fields(feedback);
      // RFC 5965 §3.1: Feedback-Type is required; §3.2: Original-Mail-From is the original's envelope sender.
      const feedbackType = text(report, 'feedback-type')?.toLowerCase();
      if (!feedbackType) return { kind: 'unparseable', problem: 'a feedback report without Feedback-Type' };
      return {
        kind: 'arf',
        feedbackType,
        original: await original(originalPart, bareAddress(text(report, 'original-mail-from'))),
      };
    }
    return { kind: 'other' };
  } catch (error) {
    return { kind: 'unparseable', problem: (error as Error).message };
  }
}

/** The uuid Herald's Message-ID `<uuid@domain>` carries (send_recipients.message_id), or null for anyone else's. */
export function heraldMessageUuid(messageId: string | null): string | null {
  const match =
    messageId === null
      ? null
      : /^<?([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})@[^@>\s]+>?$/i.exec(messageId.trim());
  return match ? match[1].toLowerCase() : null;
}

/**
 * Feedback types that are a complaint of the recipient (RFC 5965 §7.3): abuse, fraud, virus,
 * other. Not `not-spam` (RFC 6430: the opposite) nor `auth-failure` (RFC 6591: a DMARC report, no person's).
 */
export const isComplaint = (feedbackType: string) => ['abuse', 'fraud', 'virus', 'other'].includes(feedbackType);
