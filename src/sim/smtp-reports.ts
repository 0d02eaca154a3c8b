import { createTransport } from 'nodemailer';
import MailComposer, { type MailComposerAttachment } from 'nodemailer/lib/mail-composer';

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
  /** The original's envelope sender (its VERP return path), written as Original-Mail-From and as the copy's Return-Path; some loops keep neither. */
  returnPath?: string;
  /** abuse (the default), fraud, virus, other, not-spam. */
  feedbackType?: string;
  /** The mailbox provider, `fbl.example.com`. */
  reportingDomain?: string;
}

/** The original, whole as message/rfc822 or its head as text/rfc822-headers (RFC 3462 §3). */
function originalPart({ original, headersOnly }: ReportedOriginal): MailComposerAttachment {
  if (!headersOnly) return { contentType: 'message/rfc822', content: original, filename: false };
  const text = original.toString('utf8');
  const end = text.search(/\r?\n\r?\n/);
  return { contentType: 'text/rfc822-headers', content: `${end < 0 ? text : text.slice(0, end)}\r\n`, contentTransferEncoding: '7bit', contentDisposition: 'inline', filename: false };
}

/** A field block: `Name: value` lines, those without a value left out. */
const fieldBlock = (fields: Array<[string, string | undefined]>) =>
  fields
    .filter((field): field is [string, string] => field[1] !== undefined)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');

async function report(mail: ConstructorParameters<typeof MailComposer>[0], reportType: string): Promise<Buffer> {
  const root = new MailComposer(mail).compile();
  // MailComposer makes the text and its parts a multipart/mixed; a report is the same tree under its own type.
  root.setHeader('Content-Type', `multipart/report; report-type=${reportType}`);
  return root.build();
}

/** A DSN (RFC 3464) for `original`: one recipient, failed or delayed with `status`. */
export function dsnFor(options: DsnOptions): Promise<Buffer> {
  const mta = options.reportingMta ?? 'mx.sink.localhost';
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
  return report(
    {
      from: `Mail Delivery System <MAILER-DAEMON@${mta}>`,
      to: options.returnPath,
      subject: action === 'failed' ? 'Undelivered Mail Returned to Sender' : 'Delayed Mail (still being retried)',
      text: `This is the mail system at host ${mta}.\n\nYour message to <${options.recipient}> ${action === 'failed' ? 'could not be delivered' : 'has not been delivered yet'}: ${options.diagnostic ?? options.status}\n`,
      attachments: [{ contentType: 'message/delivery-status', content: `${perMessage}\r\n${perRecipient}`, filename: false }, originalPart(options)],
    },
    'delivery-status',
  );
}

/** An ARF feedback report (RFC 5965) for `original`: its recipient marked it as `feedbackType` (abuse: spam). */
export function arfFor(options: ArfOptions): Promise<Buffer> {
  const domain = options.reportingDomain ?? 'fbl.sink.localhost';
  const feedbackType = options.feedbackType ?? 'abuse';
  // The copy a provider reports is the one its mailbox held, Return-Path added at delivery (RFC 5321 §4.4).
  const original = options.returnPath ? Buffer.concat([Buffer.from(`Return-Path: <${options.returnPath}>\r\n`), options.original]) : options.original;
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
      from: `Feedback Loop <fbl@${domain}>`,
      to: options.to,
      subject: `FW: ${feedbackType} report`,
      text: `This is an email abuse report for an email message received from you (feedback type ${feedbackType}).\n`,
      attachments: [{ contentType: 'message/feedback-report', content: feedback, filename: false }, originalPart({ ...options, original })],
    },
    'feedback-report',
  );
}

/** Hands a report (any raw message) to an SMTP server, as the reporting server would: answers the server's reply. */
export async function sendReport(host: string, port: number, envelope: { from: string; to: string | string[] }, raw: Buffer): Promise<string> {
  const transport = createTransport({ host, port, secure: false, ignoreTLS: true, connectionTimeout: 10_000, socketTimeout: 30_000 });
  try {
    return (await transport.sendMail({ envelope, raw })).response;
  } finally {
    transport.close();
  }
}
