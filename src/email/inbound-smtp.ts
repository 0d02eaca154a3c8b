import type { AddressInfo } from 'node:net';
import { SMTPServer, type SMTPServerAddress } from 'smtp-server';
import type { AppContext } from '../context.ts';
import { clientGroup } from '../ratelimit/client-address.ts';
import { recordTracking } from './record.ts';
import { MAX_REPORT_BYTES, REPORT_BYTES_READ, type MailReport } from './mail-reports.ts';
import { parseMailReport } from './report-reader.ts';
import { inboundMetrics, receivedLabel, receiveReport } from './receive.ts';
import { recipientNamedBy } from './token-recipients.ts';
import { FEEDBACK_MAILBOX, readMailbox, type TokenRecipient, trackingKey } from './tracking.ts';
import type { ReadToken } from './tracking-tokens.ts';

/**
 * The first REPORT_BYTES_READ of a mail, copied into one buffer that doubles as it fills from
 * 64 KiB. smtp-server hands on each line it unescapes (`..`) as a chunk of its own: kept as a
 * view of each, a megabyte of `.` lines held 350,000 buffers, some 40 MB of heap a mail, and
 * ten connections of them ran the process out of memory.
 */
export class MailHead {
  private buffer = Buffer.allocUnsafe(64 * 1024);
  private kept = 0;

  add(chunk: Buffer): void {
    const taken = Math.min(chunk.length, REPORT_BYTES_READ - this.kept);
    if (taken <= 0) return;
    if (this.kept + taken > this.buffer.length) {
      const size = Math.min(REPORT_BYTES_READ, Math.max(this.buffer.length * 2, this.kept + taken));
      const grown = Buffer.allocUnsafe(size);
      this.buffer.copy(grown, 0, 0, this.kept);
      this.buffer = grown;
    }
    chunk.copy(this.buffer, this.kept, 0, taken);
    this.kept += taken;
  }

  bytes(): Buffer {
    return this.buffer.subarray(0, this.kept);
  }
}
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

/**
 * How long a connection may stay silent (RFC 5321 §4.5.3.2 asks servers for 5 minutes; a report's
 * sender does not dawdle).
 */
const SOCKET_TIMEOUT_MS = 60_000;
/** How long a shutdown waits for connections to end before closing them: a sender cut off mid-message tries again. */
const CLOSE_TIMEOUT_MS = 10_000;
/**
 * How long a connection may last in all (5 minutes unless a test wants less): the silence limit
 * alone is reset by every byte, so a client trickling a byte a minute would hold its connection,
 * and its address's share, for ever.
 */
const SESSION_MS = 5 * 60_000;
/** Connections at once; more are refused (421) until some end. */
const MAX_CLIENTS = 100;
/**
 * Recipients a mail may name (452 past it): a bounce or report has one, and each costs a lookup;
 * a million forged ones held the whole envelope in memory before DATA.
 */
const MAX_RECIPIENTS = 10;
/**
 * Connections at once from one client (an IPv4 address, an IPv6 /64): one host holding the
 * listener's every slot, a byte a minute each, would turn every relay's bounces away.
 */
const MAX_CLIENTS_PER_ADDRESS = 10;

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

type Mailbox = { kind: 'bounce' | 'unsubscribe'; token: ReadToken } | { kind: 'feedback' };

/** An SMTP error reply: smtp-server answers an error with a responseCode with that code and its message. */
const reply = (responseCode: number, message: string) => Object.assign(new Error(message), { responseCode });

export async function startInboundSmtp(
  ctx: AppContext,
  options: { host: string; port: number; log: InboundLog; sessionMs?: number },
): Promise<InboundSmtp> {
  const { config, database, clock } = ctx;
  const { log } = options;
  const keys = trackingKey(ctx.encryptionKey);
  const metrics = inboundMetrics(ctx.metrics);

  /** The mailbox an address names, its token as read (not yet checked); null for none of the listener's. */
  const mailboxOf = (address: string): Mailbox | null => {
    const at = address.lastIndexOf('@');
    if (at < 1 || address.slice(at + 1).toLowerCase() !== config.bounceDomain) return null;
    if (address.slice(0, at).toLowerCase() === FEEDBACK_MAILBOX) return { kind: 'feedback' };
    return readMailbox(address);
  };

  /** What one accepted recipient's mail came to, as herald_inbound_mail_total's outcome. */
  const deliver = async (mailbox: Mailbox, report: () => Promise<MailReport>): Promise<string> => {
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

  const inFlight = new Set<Promise<unknown>>();
  const connectionsFrom = new Map<string, number>();
  /** Each counted connection's end of time (SESSION_MS). */
  const deadlines = new Map<string, NodeJS.Timeout>();
  const server = new SMTPServer({
    banner: 'Herald: bounces, feedback reports and unsubscribe requests only',
    // No one logs in to hand over a bounce; no certificate is configured to offer STARTTLS with.
    disabledCommands: ['AUTH', 'STARTTLS'],
    authOptional: true,
    // Advertised as SIZE (RFC 1870); a larger mail is refused after its DATA (552).
    size: MAX_REPORT_BYTES,
    maxClients: MAX_CLIENTS,
    maxRecipients: MAX_RECIPIENTS,
    socketTimeout: SOCKET_TIMEOUT_MS,
    closeTimeout: CLOSE_TIMEOUT_MS,
    logger: false,
    onConnect(session, callback) {
      const client = clientGroup(session.remoteAddress);
      const open = connectionsFrom.get(client) ?? 0;
      if (open >= MAX_CLIENTS_PER_ADDRESS) {
        metrics.mail.inc({ outcome: 'too many connections' });
        return callback(reply(421, '4.7.0 Too many connections from your address; try again later'));
      }
      connectionsFrom.set(client, open + 1);
      const deadline = setTimeout(() => {
        metrics.mail.inc({ outcome: 'session too long' });
        for (const connection of server.connections) if (connection.id === session.id) connection.close();
      }, options.sessionMs ?? SESSION_MS).unref();
      deadlines.set(session.id, deadline);
      callback();
    },
    onClose(session) {
      clearTimeout(deadlines.get(session.id));
      if (!deadlines.delete(session.id)) return;
      const client = clientGroup(session.remoteAddress);
      const open = (connectionsFrom.get(client) ?? 1) - 1;
      if (open > 0) connectionsFrom.set(client, open);
      else connectionsFrom.delete(client);
    },
    onRcptTo(address: SMTPServerAddress, _session, callback) {
      if (mailboxOf(address.address)) return callback();
      metrics.mail.inc({ outcome: 'refused recipient' });
      callback(
        reply(
          550,
          '5.1.1 No such mailbox here: this server takes bounces, feedback reports and unsubscribe requests only',
        ),
      );
    },
    onData(stream, session, callback) {
      // Only the head of a mail is kept and read (mail-reports.ts): what a report says comes first.
      const head = new MailHead();
      stream.on('data', (chunk: Buffer) => {
        if (!stream.sizeExceeded) head.add(chunk);
      });
      stream.once('error', (error) => callback(error));
      stream.once('end', () => {
        if (stream.sizeExceeded) {
          metrics.mail.inc({ outcome: 'too large' }, session.envelope.rcptTo.length);
          return callback(reply(552, `5.3.4 Message too big: at most ${MAX_REPORT_BYTES} bytes`));
        }
        const raw = head.bytes();
        let parsed: Promise<MailReport> | undefined;
        const report = () => (parsed ??= parseMailReport(raw));
        // Whether a report came for a message still being sent: the sender tries again later.
        let early = false;
        const handling = (async () => {
          for (const { address } of session.envelope.rcptTo) {
            const mailbox = mailboxOf(address)!;
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
        })();
        inFlight.add(handling);
        handling
          .then(
            () =>
              early
                ? callback(reply(451, '4.3.0 The message is still being sent; try again later'))
                : callback(null, 'Received'),
            (error: unknown) => {
              metrics.mail.inc({ outcome: 'failed' });
              log.error(
                { err: error, bytes: raw.length },
                'inbound mail could not be recorded; the sender is asked to try again',
              );
              callback(reply(451, '4.3.0 Could not record the message now; try again later'));
            },
          )
          .finally(() => inFlight.delete(handling));
      });
    },
  });
  server.on('error', (error) => log.warn({ err: error }, 'inbound SMTP connection error'));

  await new Promise<void>((resolve, reject) => {
    const failed = (error: Error) => reject(error);
    server.server.once('error', failed);
    server.listen(options.port, options.host, () => {
      server.server.off('error', failed);
      resolve();
    });
  });
  return {
    port: (server.server.address() as AddressInfo).port,
    async close() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await Promise.allSettled(inFlight);
    },
  };
}
