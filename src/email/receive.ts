import { Counter, type Registry } from 'prom-client';
import type { Clock } from '../clock.ts';
import type { Database } from '../db/database.ts';
import type { Keyring } from '../sealed.ts';
import { recordMailReport, type ReportedEvent, type ReportedMessage, type ReportOutcome } from './inbound.ts';
import { emailBounces } from './metrics.ts';
import { heraldMessageUuid, isComplaint, type MailReport } from './mail-reports.ts';
import { recipientNamedBy } from './token-recipients.ts';
import { readMailbox, type TokenRecipient } from './tracking.ts';
import { isHardBounce, keptReply } from './transport.ts';

/**
 * A report received (by mail at the inbound listener, or an ARF report posted to
 * /email/complaints) turned into what Herald records: which message it names, what happened
 * to it, and the figures of both in /metrics.
 */

export interface InboundMetrics {
  /** Each recipient of each mail the listener took (or refused), by what came of it. */
  mail: Counter<'outcome'>;
  /** Bounces recorded, hard or soft, and when: `asynchronous` (a DSN after the next hop took the message). */
  bounces: Counter<'kind' | 'timing'>;
  /** Spam complaints recorded, by the way their report came. */
  complaints: Counter<'via'>;
}

/** The inbound figures on `registry`, made once: the listener and the complaints route share them. */
export function inboundMetrics(registry: Registry): InboundMetrics {
  const counter = <L extends string>(name: string, help: string, labelNames: L[]) =>
    (registry.getSingleMetric(name) as Counter<L> | undefined) ??
    new Counter({ name, help, labelNames, registers: [registry] });
  return {
    mail: counter(
      'herald_inbound_mail_total',
      'mail received by the inbound SMTP listener, per recipient, by outcome',
      ['outcome'],
    ),
    bounces: emailBounces(registry),
    complaints: counter(
      'herald_email_complaints_total',
      'spam complaints (ARF feedback reports) recorded, by the way they came',
      ['via'],
    ),
  };
}

/** What a report asks Herald to record, or why it asks nothing (for the log and the outcome's label). */
export function reportedEvent(report: MailReport): { event: ReportedEvent } | { ignored: string } {
  switch (report.kind) {
    case 'dsn': {
      // A VERP address names one recipient's message, so its DSN reports one recipient.
      const failed = report.failures.find((f) => f.action === 'failed');
      if (failed) {
        const reply = failed.diagnosticCode ? `${failed.status} (${keptReply(failed.diagnosticCode)})` : failed.status;
        return { event: { kind: 'bounce', hard: isHardBounce(failed.status), reply } };
      }
      // A delay is the next hop still trying: the bounce, if it comes, is another DSN.
      return { ignored: report.failures.length > 0 ? 'delayed' : 'no failure reported' };
    }
    case 'arf':
      return isComplaint(report.feedbackType)
        ? { event: { kind: 'complaint', feedbackType: report.feedbackType } }
        : { ignored: `feedback type ${report.feedbackType}` };
    case 'other':
      return { ignored: 'not a report' };
    case 'unparseable':
      return { ignored: 'unparseable' };
  }
}

/**
 * The message a report names: the recipient of the VERP address it came to (`deliveredTo`,
 * from the listener's RCPT TO), else of the original's return path, else the original's
 * Message-ID. Tokens are checked under every key of the ring, so a message sent before
 * ENCRYPTION_KEY was replaced is still found.
 */
export async function reportedMessage(
  deps: { database: Database; keys: Keyring },
  report: MailReport,
  deliveredTo: TokenRecipient | null,
): Promise<ReportedMessage> {
  const original = report.kind === 'dsn' || report.kind === 'arf' ? report.original : null;
  const verp = original?.returnPath ? readMailbox(original.returnPath) : null;
  return {
    recipient:
      deliveredTo ?? (verp?.kind === 'bounce' ? await recipientNamedBy(deps.database, deps.keys, verp.token) : null),
    messageUuid: heraldMessageUuid(original?.messageId ?? null),
  };
}

export type Received = ReportOutcome | { ignored: string };

/** Records what a report says of its message (once, however often it comes), and counts it. */
export async function receiveReport(
  deps: { database: Database; clock: Clock; keys: Keyring; metrics: InboundMetrics },
  report: MailReport,
  options: { deliveredTo: TokenRecipient | null; via: 'mail' | 'http' },
): Promise<Received> {
  const asked = reportedEvent(report);
  if ('ignored' in asked) return asked;
  const message = await reportedMessage(deps, report, options.deliveredTo);
  const outcome = await deps.database.call(recordMailReport, { message, event: asked.event, now: deps.clock.now() });
  if ('recorded' in outcome && !outcome.repeated) {
    if (asked.event.kind === 'bounce')
      deps.metrics.bounces.inc({ kind: asked.event.hard ? 'hard' : 'soft', timing: 'asynchronous' });
    else deps.metrics.complaints.inc({ via: options.via });
  }
  return outcome;
}

/** A label for what came of a report: the outcome of herald_inbound_mail_total. */
export function receivedLabel(received: Received): string {
  if ('ignored' in received) return received.ignored.startsWith('feedback type') ? 'not a complaint' : received.ignored;
  if ('refused' in received) return received.refused;
  return received.repeated ? 'repeated' : received.recorded === 'Bounce' ? 'bounce' : 'complaint';
}
