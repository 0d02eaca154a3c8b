import { simpleParser } from 'mailparser';
import { createTransport } from 'nodemailer';
import MailComposer, { type MailComposerAttachment } from 'nodemailer/lib/mail-composer';
import { FEEDBACK_MAILBOX } from '../email/tracking.ts';

/**
 * Reports a mailbox provider sends back about a message, built as real ones are, for the SMTP
 * sink and the tests: a delivery status notification (RFC 3464) and an ARF feedback report
 * (RFC 5965), each a multipart/report of a human-readable part, the machine-readable report and
 * the original message (or its head), composed by nodemailer.
 */

export interface ReportedOriginal {
  /** The message as it was sent, raw MIME. */
  original: Buffer;
  /** Its recipient, to whom it was (or was not) delivered. */
  recipient: string;
  /** Send only the original's head (text/rfc822-headers), as many providers do, rather than the whole message. */
  headersOnly?: boolean;
}

export interface DsnOptions extends ReportedOriginal {
  /** Where the DSN goes: the original's envelope sender (its VERP return path). */
  returnPath: string;
  /** The enhanced status code (RFC 3463): 5.1.1 no such user, 5.2.2 mailbox full. */
  status: string;
  /** The remote server's reply, `550 5.1.1 <ada@example.com>: user unknown`. */
  diagnostic?: string;
  /** failed (a bounce) or delayed (still trying). */
  action?: 'failed' | 'delayed';
  /** The server reporting, `mx.example.com`. */
  reportingMta?: string;
}

export interface ArfOptions extends ReportedOriginal {
  /** Where the report goes: the feedback-loop mailbox the operator registered (or the return path). */
  to: string;
  /**
   * The original's envelope sender (its VERP return path), written as Original-Mail-From and as the
   * copy's Return-Path; some loops keep neither.
   */
  returnPath?: string;
  /** abuse (the default), fraud, virus, other, not-spam. */
  feedbackType?: string;
  /** The mailbox provider, `fbl.example.com`. */
  reportingDomain?: string;
}

/** The server a DSN says it comes from, unless told otherwise. */
export const REPORTING_MTA = 'mx.sink.localhost';
/** The mailbox provider an ARF report says it comes from, unless told otherwise. */
export const REPORTING_DOMAIN = 'fbl.sink.localhost';

/** The feedback loop's address at a mailbox provider: the From of its ARF reports. */
export const feedbackLoopAddress = (reportingDomain = REPORTING_DOMAIN) => `fbl@${reportingDomain}`;

/** The original, whole as message/rfc822 or its head as text/rfc822-headers (RFC 3462 §3). */
function originalPart({ original, headersOnly }: ReportedOriginal): MailComposerAttachment {
  if (!headersOnly) return { contentType: 'message/rfc822', content: original, filename: false };
  return {
    contentType: 'text/rfc822-headers',
    content: `${headOf(original)}\r\n`,
    contentTransferEncoding: '7bit',
    contentDisposition: 'inline',
    filename: false,
  };
}

/** A message's head: what precedes its first blank line. */
function headOf(message: Buffer): string {
  const text = message.toString('utf8');
  const end = text.search(/\r?\n\r?\n/);
  return end < 0 ? text : text.slice(0, end);
}

/** A field block: `Name: value` lines, those without a value left out. */
const fieldBlock = (fields: Array<[string, string | undefined]>) =>
  fields
    .filter((field): field is [string, string] => field[1] !== undefined)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');

/** A report built as it goes over SMTP, its lines ended by CRLF (the texts below are written so). */
async function report(mail: ConstructorParameters<typeof MailComposer>[0], reportType: string): Promise<Buffer> {
  const root = new MailComposer(mail).compile();
  // MailComposer makes the text and its parts a multipart/mixed; a report is the same tree under its own type.
  root.setHeader('Content-Type', `multipart/report; report-type=${reportType}`);
  return root.build();
}

/** A DSN (RFC 3464) for `original`: one recipient, failed or delayed with `status`. */
export function dsnFor(options: DsnOptions): Promise<Buffer> {
  const mta = options.reportingMta ?? REPORTING_MTA;
  const action = options.action ?? 'failed';
  const perMessage = fieldBlock([
    ['Reporting-MTA', `dns; ${mta}`],
    ['Arrival-Date', new Date().toUTCString()],
  ]);
  const perRecipient = fieldBlock([
    ['Final-Recipient', `rfc822; ${options.recipient}`],
    ['Action', action],
    ['Status', options.status],
    ['Remote-MTA', `dns; ${mta}`],
    ['Diagnostic-Code', options.diagnostic === undefined ? undefined : `smtp; ${options.diagnostic}`],
  ]);
  const outcome = action === 'failed' ? 'could not be delivered' : 'has not been delivered yet';
  return report(
    {
      from: `Mail Delivery System <MAILER-DAEMON@${mta}>`,
      to: options.returnPath,
      subject: action === 'failed' ? 'Undelivered Mail Returned to Sender' : 'Delayed Mail (still being retried)',
      text:
        `This is the mail system at host ${mta}.\r\n\r\nYour message to ` +
        `<${options.recipient}> ${outcome}: ${options.diagnostic ?? options.status}\r\n`,
      attachments: [
        { contentType: 'message/delivery-status', content: `${perMessage}\r\n${perRecipient}`, filename: false },
        originalPart(options),
      ],
    },
    'delivery-status',
  );
}

/** An ARF feedback report (RFC 5965) for `original`: its recipient marked it as `feedbackType` (abuse: spam). */
export function arfFor(options: ArfOptions): Promise<Buffer> {
  const domain = options.reportingDomain ?? REPORTING_DOMAIN;
  const feedbackType = options.feedbackType ?? 'abuse';
  // The copy a provider reports is the one its mailbox held, Return-Path added at delivery (RFC 5321 §4.4).
  const original = options.returnPath
    ? Buffer.concat([Buffer.from(`Return-Path: <${options.returnPath}>\r\n`), options.original])
    : options.original;
  const feedback = fieldBlock([
    ['Feedback-Type', feedbackType],
    ['User-Agent', 'herald-sim-smtp/1'],
    ['Version', '1'],
    ['Original-Mail-From', options.returnPath && `<${options.returnPath}>`],
    ['Original-Rcpt-To', `<${options.recipient}>`],
    ['Arrival-Date', new Date().toUTCString()],
    ['Reported-Domain', domain],
  ]);
  return report(
    {
      from: `Feedback Loop <${feedbackLoopAddress(domain)}>`,
      to: options.to,
      subject: `FW: ${feedbackType} report`,
      text: `This is an email abuse report for an email message received from you (feedback type ${feedbackType}).\r\n`,
      attachments: [
        { contentType: 'message/feedback-report', content: feedback, filename: false },
        originalPart({ ...options, original }),
      ],
    },
    'feedback-report',
  );
}

/** Hands a report (any raw message) to an SMTP server, as the reporting server would: answers the server's reply. */
export async function sendReport(
  host: string,
  port: number,
  envelope: { from: string; to: string | string[] },
  raw: Buffer,
): Promise<string> {
  const transport = createTransport({
    host,
    port,
    secure: false,
    ignoreTLS: true,
    connectionTimeout: 10_000,
    socketTimeout: 30_000,
  });
  try {
    return (await transport.sendMail({ envelope, raw })).response;
  } finally {
    transport.close();
  }
}

/** Where the SMTP sink sends its reports: Herald's inbound listener (INBOUND_SMTP_PORT). */
export interface ReportDestination {
  host: string;
  port: number;
}

/**
 * A report the SMTP sink is asked to send about a message it received (its control route
 * `POST /reports`, docs/operations.md, "SMTP sink"): a DSN to the message's envelope sender (its VERP
 * return path), or an ARF report to the feedback mailbox at that address's domain.
 */
export interface ReportRequest {
  kind: 'dsn' | 'arf';
  /** The message by its Message-ID header, with or without the angle brackets. */
  messageId?: string;
  /**
   * The message by a recipient of it (any case), the one reported on. With both, the latest message
   * that has both; with one, the latest that has it.
   */
  to?: string;
  /** dsn: the enhanced status code (default 5.1.1). */
  status?: string;
  /** dsn: the remote server's reply, one line. */
  diagnostic?: string;
  /** dsn: failed (the default) or delayed. */
  action?: 'failed' | 'delayed';
  /** arf: abuse (the default), fraud, virus, other, not-spam or auth-failure. */
  feedbackType?: string;
  /** Quote only the original's head (text/rfc822-headers) rather than the whole message. */
  headersOnly?: boolean;
  /** Where to send it; both or neither, else the sink's `reportTo`. */
  host?: string;
  port?: number;
}

/**
 * A report sent: about which message and recipient, the envelope it went in, where, the server's
 * reply and the report itself.
 */
export interface SentReport {
  kind: 'dsn' | 'arf';
  /** The original's id at the sink and its Message-ID header (null when it had none). */
  id: number;
  messageId: string | null;
  recipient: string;
  envelope: { from: string; to: string };
  host: string;
  port: number;
  reply: string;
  raw: string;
}

/** No message the sink kept matches the request. */
export class NotReceived extends Error {}

/** The destination would not take the report (no connection, or an SMTP error reply, kept in `reply`). */
export class ReportRefused extends Error {
  readonly reply: string | null;
  constructor(message: string, reply: string | null) {
    super(message);
    this.reply = reply;
  }
}

const REQUEST_FIELDS: Record<ReportRequest['kind'], readonly string[]> = {
  dsn: ['kind', 'messageId', 'to', 'status', 'diagnostic', 'action', 'headersOnly', 'host', 'port'],
  arf: ['kind', 'messageId', 'to', 'feedbackType', 'headersOnly', 'host', 'port'],
};
/** A DSN reports a failure or a delay: a permanent (5) or transient (4) status (RFC 3463). */
const DSN_STATUS = /^[45]\.\d{1,3}\.\d{1,3}$/;
/** RFC 5965 §7.3's feedback types, and RFC 6591's auth-failure. */
const FEEDBACK_TYPES = ['abuse', 'fraud', 'virus', 'other', 'not-spam', 'auth-failure'];
const MAX_DIAGNOSTIC = 1000;

/** Where a report goes: the request's host and port, else `fallback`; RangeError for a bad one, or none. */
export function reportDestination(host: unknown, port: unknown, fallback?: ReportDestination): ReportDestination {
  if (host === undefined && port === undefined) {
    if (!fallback)
      throw new RangeError(
        'no host and port to send the report to: give them, or start the sink with a report destination ' +
          '(--report-to HOST:PORT)',
      );
    return fallback;
  }
  if (typeof host !== 'string' || host === '') throw new RangeError('host must be a non-empty string, given with port');
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 1 || port > 65535)
    throw new RangeError(`port must be a whole number from 1 to 65535, not ${String(port)}`);
  return { host, port };
}

/** The request checked field by field, its defaults filled in; RangeError says what is wrong. */
function checkedRequest(request: ReportRequest, fallback?: ReportDestination) {
  if (typeof request !== 'object' || request === null) throw new RangeError('a report request must be an object');
  const { kind } = request;
  if (kind !== 'dsn' && kind !== 'arf') throw new RangeError(`kind must be dsn or arf, not ${String(kind)}`);
  const unknown = Object.keys(request).find((field) => !REQUEST_FIELDS[kind].includes(field));
  if (unknown !== undefined)
    throw new RangeError(
      `${unknown} is not a field of a${kind === 'arf' ? 'n' : ''} ${kind} request (${REQUEST_FIELDS[kind].join(', ')})`,
    );
  const optionalText = (field: 'messageId' | 'to' | 'diagnostic' | 'feedbackType') => {
    const value = request[field];
    if (
      value !== undefined &&
      // biome-ignore lint/suspicious/noControlCharactersInRegex: a control character is what makes text not one line
      (typeof value !== 'string' || value === '' || value.length > MAX_DIAGNOSTIC || /[\x00-\x1f\x7f]/.test(value))
    ) {
      throw new RangeError(`${field} must be one line of 1 to ${MAX_DIAGNOSTIC} characters`);
    }
    return value;
  };
  const messageId = optionalText('messageId');
  const to = optionalText('to');
  if (messageId === undefined && to === undefined) throw new RangeError('name the message: messageId, to, or both');
  const status = request.status ?? '5.1.1';
  if (typeof status !== 'string' || !DSN_STATUS.test(status))
    throw new RangeError(`status must be an enhanced status code of class 4 or 5, like 5.1.1, not ${String(status)}`);
  const action = request.action ?? 'failed';
  if (action !== 'failed' && action !== 'delayed')
    throw new RangeError(`action must be failed or delayed, not ${String(action)}`);
  const feedbackType = optionalText('feedbackType') ?? 'abuse';
  if (!FEEDBACK_TYPES.includes(feedbackType))
    throw new RangeError(`feedbackType must be one of ${FEEDBACK_TYPES.join(', ')}, not ${feedbackType}`);
  const { headersOnly = false } = request;
  if (typeof headersOnly !== 'boolean') throw new RangeError('headersOnly must be true or false');
  const destination = reportDestination(request.host, request.port, fallback);
  return {
    kind,
    messageId,
    to,
    status,
    diagnostic: optionalText('diagnostic'),
    action,
    feedbackType,
    headersOnly,
    destination,
  };
}

const HEAD_PARSING = { skipHtmlToText: true, skipTextToHtml: true, skipTextLinks: true, skipImageLinks: true } as const;

/** A message's Message-ID header as mailparser reads it (`<…>`), or null. */
async function messageIdOf(raw: Buffer): Promise<string | null> {
  return (await simpleParser(`${headOf(raw)}\r\n\r\n`, HEAD_PARSING)).messageId ?? null;
}

/** What a report needs of a message the sink received (smtp.ts's ReceivedMail). */
export interface ReportedMail {
  id: number;
  /** The envelope sender: the return path a DSN goes to; '' for the null sender. */
  from: string;
  to: string[];
  raw: Buffer;
}

/**
 * Sends the report `request` asks for about the latest message `received` (oldest first, as
 * the sink lists them, `to` among its recipients when given) that matches it. Throws
 * RangeError for a bad request, NotReceived when no message matches, ReportRefused when the
 * destination does not take it.
 */
export async function reportOn(
  received: (filter: { to?: string }) => ReportedMail[],
  request: ReportRequest,
  fallback?: ReportDestination,
): Promise<SentReport> {
  const order = checkedRequest(request, fallback);
  const wanted = order.messageId === undefined ? undefined : `<${order.messageId.replace(/^<|>$/g, '')}>`;
  const candidates = received({ to: order.to }).reverse();
  let mail: ReportedMail | undefined;
  let messageId: string | null = null;
  for (const candidate of candidates) {
    // Parsing a head only when its bytes hold the id keeps a lookup among 100,000 kept messages quick.
    if (wanted !== undefined && !candidate.raw.includes(wanted.slice(1, -1))) continue;
    messageId = await messageIdOf(candidate.raw);
    if (wanted === undefined || messageId === wanted) {
      mail = candidate;
      break;
    }
  }
  if (!mail) {
    const named = [wanted && `Message-ID ${wanted}`, order.to && `recipient ${order.to}`].filter(Boolean).join(' and ');
    throw new NotReceived(`no message received with ${named}`);
  }
  let recipient: string;
  if (order.to !== undefined) recipient = mail.to.find((address) => address.toLowerCase() === order.to!.toLowerCase())!;
  else if (mail.to.length === 1) recipient = mail.to[0];
  else
    throw new RangeError(`message ${mail.id} went to ${mail.to.length} recipients: name the one reported on with to`);
  if (mail.from === '')
    throw new RangeError(`message ${mail.id} came from the null sender: it has no return path to report to`);

  const original = { original: mail.raw, recipient, headersOnly: order.headersOnly };
  const returnPath = mail.from;
  let envelope: SentReport['envelope'];
  let raw: Buffer;
  if (order.kind === 'dsn') {
    // A DSN goes to the return path from the null sender, so that it never bounces itself (RFC 3464 §2).
    envelope = { from: '', to: returnPath };
    raw = await dsnFor({
      ...original,
      returnPath,
      status: order.status,
      diagnostic: order.diagnostic,
      action: order.action,
    });
  } else {
    const at = returnPath.lastIndexOf('@');
    if (at < 0)
      throw new RangeError(`message ${mail.id}'s return path ${returnPath} has no domain to send an ARF report to`);
    envelope = { from: feedbackLoopAddress(), to: `${FEEDBACK_MAILBOX}@${returnPath.slice(at + 1)}` };
    raw = await arfFor({ ...original, to: envelope.to, returnPath, feedbackType: order.feedbackType });
  }
  const { host, port } = order.destination;
  let reply: string;
  try {
    reply = await sendReport(host, port, envelope, raw);
  } catch (error) {
    const { response } = error as { response?: string };
    throw new ReportRefused(
      `${host}:${port} did not take the report: ${response ?? (error as Error).message}`,
      response ?? null,
    );
  }
  return {
    kind: order.kind,
    id: mail.id,
    messageId,
    recipient,
    envelope,
    host,
    port,
    reply,
    raw: raw.toString('utf8'),
  };
}
