/**
 * The inbound SMTP listener's thread (inbound-smtp.ts): it speaks SMTP, holds each connection to
 * its limits and keeps the head of each mail. smtp-server reads a mail's data a byte at a time
 * (its dot-unstuffing), 40 ms of CPU a megabyte: on the thread that answers the API, ten 10 MB
 * mails at once held requests up to a second. Whatever the listener counts or a mail reports is
 * asked of the main thread, and the SMTP client answered only once it has been: a reply means
 * what it says is counted and recorded.
 */
import type { AddressInfo } from 'node:net';
import { parentPort, workerData } from 'node:worker_threads';
import { SMTPServer, type SMTPServerAddress } from 'smtp-server';
import { clientGroup } from '../ratelimit/client-address.ts';
import { MailHead } from './mail-head.ts';
import { MAX_REPORT_BYTES } from './mail-reports.ts';
import { inboundMailbox } from './tracking.ts';

export interface ListenerSettings {
  host: string;
  port: number;
  sessionMs: number;
  bounceDomain: string;
}

/** An SMTP reply the main thread asks for: smtp-server answers an error with a responseCode with it. */
export interface SmtpReply {
  code: number;
  message: string;
}

/** What the thread asks the main thread; each is answered (ListenerOrder's answer) before the client is. */
export type ListenerQuestion =
  /** An outcome of herald_inbound_mail_total to count, `times` times. */
  | { call: number; count: string; times: number }
  /** A mail's recipients and head, to deliver: answered with the reply to give, or none for 250. */
  | { call: number; mail: { recipients: string[]; head: Uint8Array } };

export type ListenerReport =
  | { kind: 'listening'; port: number }
  | { kind: 'failed'; message: string; code: string | undefined }
  | { kind: 'ask'; question: ListenerQuestion }
  | { kind: 'warn'; message: string }
  | { kind: 'closed' };

export type ListenerOrder = { kind: 'answer'; call: number; reply: SmtpReply | undefined } | { kind: 'close' };

/**
 * How long a connection may stay silent (RFC 5321 §4.5.3.2 asks servers for 5 minutes; a report's
 * sender does not dawdle).
 */
const SOCKET_TIMEOUT_MS = 60_000;
/** How long a shutdown waits for connections to end before closing them: a sender cut off mid-message tries again. */
const CLOSE_TIMEOUT_MS = 10_000;
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

const settings = workerData as ListenerSettings;
const port = parentPort!;
const report = (message: ListenerReport, transfer: ArrayBuffer[] = []) => port.postMessage(message, transfer);

let calls = 0;
const waiting = new Map<number, (reply: SmtpReply | undefined) => void>();
/** Asks the main thread, and resolves with its answer. */
function ask(
  question: (call: number) => ListenerQuestion,
  transfer: ArrayBuffer[] = [],
): Promise<SmtpReply | undefined> {
  const call = ++calls;
  return new Promise((resolve) => {
    waiting.set(call, resolve);
    report({ kind: 'ask', question: question(call) }, transfer);
  });
}
const count = (outcome: string, times = 1) => ask((call) => ({ call, count: outcome, times }));

/** An SMTP error reply: smtp-server answers an error with a responseCode with that code and its message. */
const reply = ({ code, message }: SmtpReply) => Object.assign(new Error(message), { responseCode: code });

const connectionsFrom = new Map<string, number>();
/** Each counted connection's end of time (sessionMs). */
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
      void count('too many connections').then(() =>
        callback(reply({ code: 421, message: '4.7.0 Too many connections from your address; try again later' })),
      );
      return;
    }
    connectionsFrom.set(client, open + 1);
    const deadline = setTimeout(() => {
      void count('session too long').then(() => {
        for (const connection of server.connections) if (connection.id === session.id) connection.close();
      });
    }, settings.sessionMs).unref();
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
    if (inboundMailbox(address.address, settings.bounceDomain)) return callback();
    void count('refused recipient').then(() =>
      callback(
        reply({
          code: 550,
          message:
            '5.1.1 No such mailbox here: this server takes bounces, feedback reports and unsubscribe requests only',
        }),
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
      const recipients = session.envelope.rcptTo.map(({ address }) => address);
      if (stream.sizeExceeded) {
        void count('too large', recipients.length).then(() =>
          callback(reply({ code: 552, message: `5.3.4 Message too big: at most ${MAX_REPORT_BYTES} bytes` })),
        );
        return;
      }
      // A copy of its own, handed over to the main thread rather than copied again.
      const bytes = new Uint8Array(head.bytes());
      void ask((call) => ({ call, mail: { recipients, head: bytes } }), [bytes.buffer]).then((answer) =>
        answer ? callback(reply(answer)) : callback(null, 'Received'),
      );
    });
  },
});
server.on('error', (error) => report({ kind: 'warn', message: error.message }));

port.on('message', (order: ListenerOrder) => {
  if (order.kind === 'answer') {
    const resolve = waiting.get(order.call);
    waiting.delete(order.call);
    resolve?.(order.reply);
    return;
  }
  server.close(() => report({ kind: 'closed' }));
});

const failed = (error: NodeJS.ErrnoException) => report({ kind: 'failed', message: error.message, code: error.code });
server.server.once('error', failed);
server.listen(settings.port, settings.host, () => {
  server.server.off('error', failed);
  report({ kind: 'listening', port: (server.server.address() as AddressInfo).port });
});
