import { createTransport } from 'nodemailer';
import { Counter, type Registry } from 'prom-client';
import { LocalSendRate, type SendRate } from '../../ratelimit/send-rate.ts';
import { silentLog, type Log } from '../../log.ts';
import { SharedSendRate } from '../../ratelimit/shared-send-rate.ts';
import type { SmtpSettings } from './smtp-url.ts';
import { keptReply, type EmailResult, type EmailTransport, type OutgoingEmail } from '../transport.ts';

/**
 * How long the transport waits on the relay, in ms: a relay that is down or stalls defers the
 * messages it holds, it never holds a send.
 */
export interface SmtpTiming {
  /** For the TCP (and TLS) connection. Default 30 s. */
  connection: number;
  /** For the 220 greeting once connected. Default 30 s. */
  greeting: number;
  /**
   * For any answer once talking (RFC 5321 §4.5.3.2 allows a relay minutes for DATA; 2 minutes, the
   * default, is what relays answer within).
   */
  socket: number;
  /**
   * For a message from the start of its session to the relay's last answer. The other timeouts
   * start again at each byte, so a relay that trickles a reply, or challenges AUTH for ever,
   * held a pooled connection, and with all of them every email of the process. Default 5 minutes.
   */
  message: number;
}

export const DEFAULT_SMTP_TIMING: SmtpTiming = {
  connection: 30_000,
  greeting: 30_000,
  socket: 120_000,
  message: 300_000,
};

/**
 * Messages a pooled connection carries before it is closed and another opened: relays count
 * per connection (Postfix's default smtpd_client_message_rate_limit window), and a fresh
 * connection now and then spreads the pool over a relay's addresses.
 */
const MESSAGES_PER_CONNECTION = 500;

/**
 * Times a message is put on another connection at once when its own closed under it, before
 * it is answered Deferred: once covers a pooled connection the relay closed while idle.
 */
const REQUEUES = 1;

/** What an answer was, for the figures: accepted, refused for now, refused for good, or no answer at all. */
export type AnswerClass = '2xx' | '4xx' | '5xx' | 'connection';

export interface SmtpMetrics {
  messages: Counter;
  answers: Counter<'class'>;
}

/** The SMTP transport's figures in /metrics: messages handed to the relay, and its answers by class. */
export function registerSmtpMetrics(registry: Registry): SmtpMetrics {
  const names = ['herald_smtp_messages_total', 'herald_smtp_answers_total'];
  // A worker built again on one registry (tests) reports its own transport.
  for (const name of names) registry.removeSingleMetric(name);
  const registers = [registry];
  return {
    messages: new Counter({ name: names[0], help: 'messages handed to the SMTP relay', registers }),
    answers: new Counter({
      name: names[1],
      help:
        "the relay's answers by class: 2xx accepted, 4xx refused for now, 5xx refused for good, connection: " +
        'none (refused, dropped, timed out, TLS)',
      labelNames: ['class'],
      registers,
    }),
  };
}

/** An error nodemailer hands back: a refusal carries the relay's reply; a connection failure only its code. */
interface SendError extends Error {
  code?: string;
  responseCode?: number;
  response?: string;
  /**
   * Set with responseCode: 5xx but 503 (RFC 5321 §4.2.1); nodemailer's reading, so no reply text is
   * read for meaning.
   */
  permanent?: boolean;
}

/**
 * What a failed hand-over came to. Only the relay's refusal of this message (its MAIL, RCPT
 * or DATA: nodemailer's EENVELOPE and EMESSAGE) can bounce it; a refusal of the session
 * (AUTH, a 421, STARTTLS) or no answer at all (refused, dropped, timed out) says nothing of
 * the message, and is Deferred: tried again later, never lost. A 530 to MAIL (RFC 4954:
 * authentication required; or STARTTLS first) refuses the session too, though it answers the
 * message's MAIL: a relay that wants a login EMAIL_TRANSPORT lacks bounces nothing.
 */
export function classifyFailure(error: SendError): { result: EmailResult; answer: AnswerClass; ofRelay: boolean } {
  const code = error.responseCode;
  const ofMessage = error.code === 'EENVELOPE' || error.code === 'EMESSAGE';
  const refusal = ofMessage && typeof code === 'number' && code !== SESSION_REFUSED;
  const answer: AnswerClass = typeof code !== 'number' ? 'connection' : code >= 500 ? '5xx' : '4xx';
  if (refusal) {
    const outcome = error.permanent ? 'bounced' : 'deferred';
    return { result: { outcome, reply: replyOf(error) }, answer, ofRelay: false };
  }
  const reply =
    typeof code === 'number'
      ? `the relay refused the session: ${replyOf(error)}`
      : keptReply(`no answer from the relay: ${error.code ?? 'error'} ${error.message}`);
  return { result: { outcome: 'deferred', reply }, answer, ofRelay: true };
}

/** 530: the session must authenticate (or start TLS) before any message (RFC 4954 §6, RFC 3207). */
const SESSION_REFUSED = 530;

/** The relay's reply as it wrote it, kept as one line (a NUL would fail the page's record). */
const replyOf = (error: SendError) => keptReply(error.response ?? `${error.responseCode} ${error.message}`);

export interface SmtpTransportOptions {
  metrics: Registry;
  /** REDIS_URL: the processes sending through one relay account share its rate (ratelimit/shared-send-rate.ts). */
  redisUrl?: string;
  /** Where in Redis the shared rates live; default `herald:smtp-rate:`. */
  rateKeyPrefix?: string;
  log?: Log;
  timing?: Partial<SmtpTiming>;
}

/** Failures of the relay itself in a row (no answer, or a 4xx to the session) before the operator is told. */
export const RELAY_FAILURES_TO_TELL = 3;

/**
 * Tells the operator when the relay, not a message, is the trouble: a 5xx to the session (AUTH
 * refused, the relay turning Herald away) at once, an error; a run of RELAY_FAILURES_TO_TELL
 * connections that failed or sessions refused for now, a warning; and its end, when the relay
 * answers a message again. Once a run, not once a message: messages are deferred meanwhile, a
 * page of a thousand of them in a few seconds. A refusal of one message (its MAIL, RCPT or
 * DATA) is the relay working, and ends a run.
 */
class RelayWatch {
  private readonly relay: string;
  private readonly log: Log;
  private failures = 0;
  private told = false;

  constructor(relay: string, log: Log) {
    this.relay = relay;
    this.log = log;
  }

  answered(): void {
    if (this.told) this.log.warn({ relay: this.relay, failures: this.failures }, 'the SMTP relay answers again');
    this.failures = 0;
    this.told = false;
  }

  failed(answer: AnswerClass, reply: string): void {
    this.failures += 1;
    if (this.told) return;
    if (answer === '5xx') {
      this.told = true;
      const message = "the SMTP relay refused the session: messages are deferred (is EMAIL_TRANSPORT's login right?)";
      this.log.error({ relay: this.relay, reply }, message);
    } else if (this.failures >= RELAY_FAILURES_TO_TELL) {
      this.told = true;
      const message = 'the SMTP relay keeps failing: messages are deferred until it answers';
      this.log.warn({ relay: this.relay, failures: this.failures, reply }, message);
    }
  }
}

/**
 * `EMAIL_TRANSPORT=smtp://…`: every message handed, as the renderer wrote it (raw MIME, not
 * built again), to one smarthost relay over nodemailer's pool of `pool` connections, the
 * envelope sender its VERP return path. STARTTLS when offered (`tls=require`: or nothing),
 * the rate capped per process or across processes, each answer mapped to an EmailResult:
 * 2xx accepted, a refusal of the message 4xx deferred and 5xx bounced (record.ts tells hard
 * from soft), and anything else deferred (classifyFailure).
 */
export function smtpEmailTransport(settings: SmtpSettings, options: SmtpTransportOptions): EmailTransport {
  const timing = { ...DEFAULT_SMTP_TIMING, ...options.timing };
  const metrics = registerSmtpMetrics(options.metrics);
  const pool = () =>
    createTransport({
      pool: true,
      host: settings.host,
      port: settings.port,
      secure: settings.implicitTls,
      requireTLS: settings.requireTls,
      auth: settings.auth && { user: settings.auth.user, pass: settings.auth.password },
      tls: settings.ca === undefined ? undefined : { ca: settings.ca },
      maxConnections: settings.pool,
      maxMessages: MESSAGES_PER_CONNECTION,
      maxRequeues: REQUEUES,
      connectionTimeout: timing.connection,
      greetingTimeout: timing.greeting,
      socketTimeout: timing.socket,
    });
  let mailer = pool();
  let closed = false;
  /**
   * Rejects once a message is past its deadline, unless cancelled first. nodemailer cannot end
   * one message's session, so the pool goes (its other messages fail, deferred, to be tried
   * again) and a new one takes the next.
   */
  const deadline = () => {
    let timer: NodeJS.Timeout | undefined;
    const passed = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const stale = mailer as unknown as { close(options: { force: boolean }): void };
        if (!closed) mailer = pool();
        // Forced, or the connection in the middle of the message stays (nodemailer's pool takes
        // the option; its declarations do not say so).
        stale.close({ force: true });
        const error = new Error(`the relay did not take the message within ${timing.message / 1000} s`);
        reject(Object.assign(error, { code: 'ETIMEDOUT' }));
      }, timing.message);
    });
    return { passed, cancel: () => clearTimeout(timer) };
  };
  const relay = new RelayWatch(`${settings.host}:${settings.port}`, options.log ?? silentLog);
  const waiting: Array<() => void> = [];
  const pump = () => {
    while (waiting.length > 0 && rate.take(false, waiting.length)) waiting.shift()!();
  };
  const rate = sendRate(settings, options, pump);
  /** Resolves when the rate lets one more message go, in the order asked. */
  const token = () =>
    waiting.length === 0 && rate.take(false, 1)
      ? Promise.resolve()
      : new Promise<void>((resolve) => {
          waiting.push(resolve);
          pump();
        });
  return {
    async send(message: OutgoingEmail): Promise<EmailResult> {
      await token();
      metrics.messages.inc();
      const sent = mailer.sendMail({ envelope: { from: message.from, to: [message.to] }, raw: message.raw });
      const due = deadline();
      try {
        const info = await Promise.race([sent, due.passed]);
        metrics.answers.inc({ class: '2xx' });
        relay.answered();
        return { outcome: 'accepted', reply: keptReply(info.response) };
      } catch (error) {
        const { result, answer, ofRelay } = classifyFailure(error as SendError);
        metrics.answers.inc({ class: answer });
        if (ofRelay) relay.failed(answer, result.reply);
        else relay.answered();
        return result;
      } finally {
        due.cancel();
        sent.catch(() => {});
      }
    },
    async close() {
      closed = true;
      mailer.close();
      await rate.close();
    },
  };
}

/**
 * The process's own rate, or one shared with the other processes sending through the relay account
 * when Redis is there to share it.
 */
function sendRate(settings: SmtpSettings, options: SmtpTransportOptions, ready: () => void): SendRate {
  const common = { tps: settings.rate, urgentShare: 0, monotonic: () => performance.now(), ready };
  if (settings.rate === 0 || !options.redisUrl) return new LocalSendRate(common);
  return new SharedSendRate({
    ...common,
    redisUrl: options.redisUrl,
    account: `${settings.host}:${settings.port}:${settings.auth?.user ?? ''}`,
    keyPrefix: options.rateKeyPrefix ?? 'herald:smtp-rate:',
    name: 'the SMTP send rate',
    log: options.log ?? silentLog,
  });
}
