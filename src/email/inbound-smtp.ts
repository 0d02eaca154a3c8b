import type { ResourceLimits, Worker } from 'node:worker_threads';
import type { AppContext } from '../context.ts';
import { startThread } from '../threads.ts';
import type { ListenerOrder, ListenerReport, ListenerSettings, SmtpReply } from './inbound-smtp-thread.ts';
import type { MailReport } from './mail-reports.ts';
import { recordTracking } from './record.ts';
import { inboundMetrics, receivedLabel, receiveReport } from './receive.ts';
import { parseMailReport } from './report-reader.ts';
import { recipientNamedBy } from './token-recipients.ts';
import { type InboundMailbox, inboundMailbox, type TokenRecipient, trackingKey } from './tracking.ts';

/**
 * The inbound SMTP listener (INBOUND_SMTP_PORT; docs/email.md, "Inbound mail: bounces,
 * complaints, unsubscribes"): the MX of BOUNCE_DOMAIN. It takes mail for three kinds of address
 * there and no other:
 *
 * - `bounces+<token>@`: a message's VERP return path. A DSN to it is a Bounce for that
 *   message (an ARF report to it, as some feedback loops send, a Spam Report);
 * - `unsubscribe+<token>@`: List-Unsubscribe's `mailto:`. Any mail to it unsubscribes, as the
 *   one-click POST does;
 * - `fbl@`: the mailbox an operator registers with mailbox providers' feedback loops. An ARF
 *   report to it names its message by the original's return path or Message-ID.
 *
 * Every other recipient is refused at RCPT (550 5.1.1), so nothing is taken that no one reads.
 * A mail that reports nothing Herald records (garbage, an auto-reply, a forged token) is logged,
 * counted, answered 250 and dropped: the sender would only send it again. Only a failure to
 * record (the database down) answers 451, so the sender tries again later.
 */

export interface InboundLog {
  info(object: object, message: string): void;
  warn(object: object, message: string): void;
  error(object: object, message: string): void;
}

export interface InboundSmtp {
  /** The port it listens on (INBOUND_SMTP_PORT, or the one chosen for 0). */
  port: number;
  /** Stops accepting, lets mail being recorded finish, and closes. */
  close(): Promise<void>;
}

/** Outcomes that recorded something (or had before): the others drop the mail, and are logged as warnings. */
const RECORDED = new Set(['bounce', 'complaint', 'unsubscribe', 'repeated']);

/**
 * How long a connection may last in all (5 minutes unless a test wants less): the silence limit
 * alone is reset by every byte, so a client trickling a byte a minute would hold its connection,
 * and its address's share, for ever.
 */
const SESSION_MS = 5 * 60_000;
/** The listener thread's heap: a hundred connections' heads of a MiB each, and smtp-server's own. */
const THREAD_LIMITS: ResourceLimits = { maxOldGenerationSizeMb: 256, maxYoungGenerationSizeMb: 16 };
/** How soon a listener thread that ended is started again. */
const RESTART_MS = 1_000;

export async function startInboundSmtp(
  ctx: AppContext,
  options: { host: string; port: number; log: InboundLog; sessionMs?: number; threadLimits?: ResourceLimits },
): Promise<InboundSmtp> {
  const { config, database, clock } = ctx;
  const { log } = options;
  const keys = trackingKey(ctx.encryptionKey);
  const metrics = inboundMetrics(ctx.metrics);

  /** What one accepted recipient's mail came to, as herald_inbound_mail_total's outcome. */
  const deliver = async (mailbox: InboundMailbox, report: () => Promise<MailReport>): Promise<string> => {
    let recipient: TokenRecipient | null = null;
    if (mailbox.kind !== 'feedback') {
      // Checked here, not at RCPT TO: a token is checked against the row it names, and a refusal
      // there only for a forged token naming a row that is there would tell which rows are.
      recipient = await recipientNamedBy(database, keys, mailbox.token);
      if (recipient === null) return 'unknown message';
      if (mailbox.kind === 'unsubscribe') {
        const done = await database.call(recordTracking, {
          ...recipient,
          event: { kind: 'unsubscribe' },
          userAgent: null,
          head: false,
          confirmed: true,
          now: clock.now(),
        });
        // 'unconfirmed' is a machine's click, which a mail never is (confirmed above).
        if (done === undefined || done === 'unconfirmed') return 'unknown message';
        return done.outcome === 'recorded' ? 'unsubscribe' : done.outcome;
      }
    }
    const received = await receiveReport({ database, clock, keys, metrics }, await report(), {
      deliveredTo: recipient,
      via: 'mail',
    });
    return receivedLabel(received);
  };

  /** A mail delivered to each of its recipients in turn: the reply to give, or none for 250. */
  const handle = async (recipients: string[], raw: Buffer): Promise<SmtpReply | undefined> => {
    let parsed: Promise<MailReport> | undefined;
    const report = () => (parsed ??= parseMailReport(raw));
    // Whether a report came for a message still being sent: the sender tries again later.
    let early = false;
    try {
      for (const address of recipients) {
        // The thread took only the listener's own mailboxes.
        const mailbox = inboundMailbox(address, config.bounceDomain)!;
        const outcome = await deliver(mailbox, report);
        metrics.mail.inc({ outcome });
        if (outcome === 'in flight') early = true;
        const read = parsed && (await parsed);
        // The mailbox by its kind and row, never its address: a bounce or unsubscribe
        // mailbox's token works as the recipient's link does, and MAIL FROM is a person's.
        log[RECORDED.has(outcome) ? 'info' : 'warn'](
          {
            mailbox: mailbox.kind,
            ...('token' in mailbox && { recipientId: mailbox.token.recipientId }),
            bytes: raw.length,
            outcome,
            ...(read?.kind === 'unparseable' && { problem: read.problem }),
          },
          RECORDED.has(outcome) ? `inbound mail: ${outcome}` : `inbound mail dropped: ${outcome}`,
        );
      }
    } catch (error) {
      metrics.mail.inc({ outcome: 'failed' });
      log.error(
        { err: error, bytes: raw.length },
        'inbound mail could not be recorded; the sender is asked to try again',
      );
      return { code: 451, message: '4.3.0 Could not record the message now; try again later' };
    }
    return early ? { code: 451, message: '4.3.0 The message is still being sent; try again later' } : undefined;
  };

  const inFlight = new Set<Promise<unknown>>();
  let closing = false;
  let restart: NodeJS.Timeout | undefined;

  /** The listener's thread on `port`, once it listens; rejects with the listen's error (its code kept). */
  const run = (port: number) =>
    new Promise<{ worker: Worker; port: number }>((resolve, reject) => {
      const worker = startThread(new URL('./inbound-smtp-thread.ts', import.meta.url), {
        resourceLimits: options.threadLimits ?? THREAD_LIMITS,
        workerData: {
          host: options.host,
          port,
          sessionMs: options.sessionMs ?? SESSION_MS,
          bounceDomain: config.bounceDomain,
        } satisfies ListenerSettings,
      });
      let listening = false;
      const answer = (order: ListenerOrder) => worker.postMessage(order);
      worker.on('message', (message: ListenerReport) => {
        if (message.kind === 'listening') {
          listening = true;
          resolve({ worker, port: message.port });
        } else if (message.kind === 'failed') {
          void worker.terminate();
          reject(Object.assign(new Error(message.message), { code: message.code }));
        } else if (message.kind === 'warn') {
          log.warn({ err: message.message }, 'inbound SMTP connection error');
        } else if (message.kind === 'ask') {
          const { question } = message;
          if ('count' in question) {
            metrics.mail.inc({ outcome: question.count }, question.times);
            return answer({ kind: 'answer', call: question.call, reply: undefined });
          }
          const { recipients, head } = question.mail;
          const handling = handle(recipients, Buffer.from(head.buffer, head.byteOffset, head.byteLength)).then(
            (reply) => answer({ kind: 'answer', call: question.call, reply }),
          );
          inFlight.add(handling);
          void handling.finally(() => inFlight.delete(handling));
        }
      });
      worker.on('error', (error) => log.error({ err: error }, 'the inbound SMTP listener failed'));
      worker.on('exit', (code) => {
        if (!listening) return reject(new Error(`the inbound SMTP listener ended as it started (code ${code})`));
        if (closing) return;
        // Mails it was taking were not answered 250: their senders try again.
        log.error({ code }, `the inbound SMTP listener ended; it starts again in ${RESTART_MS} ms`);
        const again = () => {
          restart = undefined;
          if (closing) return;
          run(listener.port).then(
            (started) => (listener = started),
            (error: unknown) => {
              log.error({ err: error }, `the inbound SMTP listener could not start again; trying in ${RESTART_MS} ms`);
              restart = setTimeout(again, RESTART_MS);
            },
          );
        };
        restart = setTimeout(again, RESTART_MS);
      });
    });

  let listener = await run(options.port);
  return {
    port: listener.port,
    async close() {
      closing = true;
      clearTimeout(restart);
      const { worker } = listener;
      await new Promise<void>((resolve) => {
        worker.once('exit', () => resolve());
        worker.on('message', (message: ListenerReport) => message.kind === 'closed' && resolve());
        worker.postMessage({ kind: 'close' } satisfies ListenerOrder);
      });
      await Promise.allSettled(inFlight);
      await worker.terminate();
    },
  };
}
