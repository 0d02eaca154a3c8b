/**
 * `herald sim smtp`: an SMTP server (smtp-server) standing in for a smarthost or a
 * recipient's MX in development, benchmarks and tests. It accepts mail, answers chosen
 * recipients with a deferral or a refusal carrying the enhanced status code given, drops
 * connections or answers slowly on request, and shows what it took in process and on a
 * small HTTP control port. Everything is in memory. It also sends a DSN or an ARF report about
 * a message it took back to Herald's inbound port, as a recipient's provider would later.
 */
import type { AddressInfo, Socket } from 'node:net';
import { once } from 'node:events';
import { SMTPServer, type SMTPServerDataStream, type SMTPServerSession } from 'smtp-server';
import { BadRequest, readJson, startControl, type Routes } from './control.ts';
import {
  NotReceived,
  ReportRefused,
  reportDestination,
  reportOn,
  type ReportDestination,
  type ReportRequest,
  type SentReport,
} from './smtp-reports.ts';
import { Ring } from './taken.ts';

/**
 * What the sink answers a recipient (RCPT TO) that `match` names: an exact address (any
 * case) or, written `/pattern/flags` or given as a RegExp, a regular expression. The first
 * rule that matches decides; an address no rule matches is accepted.
 *
 * - `accept`: 250.
 * - `defer`: `code status text` (default `451 4.3.0 try again later`) to the first `times`
 *   attempts for each address the rule matches, then 250.
 * - `reject`: `code status text` every time (default `550 5.1.1 user unknown`).
 *
 * `status`, the enhanced status code (RFC 3463), is written right after the code as given;
 * with a `code` of its own and no `status` the reply has none, as older servers answer.
 * `at: 'data'` accepts the recipient and gives the reply to the end of the message's data
 * instead, refusing the whole message, as a provider's content filter does.
 */
export interface SmtpRule {
  match: string | RegExp;
  action: 'accept' | 'defer' | 'reject';
  /** defer only: how many attempts for each address are deferred. */
  times?: number;
  code?: number;
  status?: string;
  text?: string;
  /** When the reply is given: to the RCPT TO (the default) or to the end of the data. */
  at?: 'rcpt' | 'data';
}

/** A rule as the sink reports it: its match written as a string, its reply in full, and how often it was used. */
export interface SmtpRuleView {
  match: string;
  action: SmtpRule['action'];
  at: 'rcpt' | 'data';
  times?: number;
  /** The reply it gives (a defer's until it lets the address through); absent for accept. */
  reply?: string;
  /** Recipients this rule has answered. */
  used: number;
}

/** Connection faults, for tests of a client's recovery and of a slow next hop. */
export interface SmtpFaults {
  /**
   * After this many messages accepted (across connections), the next one's data is read and its
   * connection destroyed without an answer; that message is not kept. 0: never.
   */
  dropAfter: number;
  /** Drop again after each further `dropAfter` messages, rather than once. */
  dropRepeat: boolean;
  /** Wait this long after a message's data before answering it. */
  delayMs: number;
}

export interface SmtpSinkOptions {
  /** SMTP port; 0 (the default here) picks a free one, which `port` then tells. */
  port?: number;
  /** Control HTTP port; 0 (the default here) picks a free one; null: no control port. */
  httpPort?: number | null;
  host?: string;
  /**
   * When set, a client must AUTH (PLAIN or LOGIN) with this user and password before MAIL; unset,
   * AUTH is optional and any is accepted.
   */
  user?: string;
  password?: string;
  /**
   * STARTTLS offered with this certificate (PEM, its chain after it) and private key; without it
   * STARTTLS is not offered.
   */
  tls?: { cert: string | Buffer; key: string | Buffer };
  rules?: SmtpRule[];
  dropAfter?: number;
  dropRepeat?: boolean;
  delayMs?: number;
  /**
   * How many accepted messages are kept to read (the latest). 0 counts them only, keeping none: for
   * benchmarks. Default 100,000.
   */
  retain?: number;
  /** The SIZE announced and enforced, in bytes. Default 50 MiB. */
  maxSize?: number;
  /** Where reports go when a request names no host and port: Herald's inbound listener. */
  reportTo?: ReportDestination;
  /** Clock in epoch milliseconds, for receivedAt. */
  now?: () => number;
}

/** A message the sink accepted: its envelope and its data as sent. */
export interface ReceivedMail {
  /** 1, 2, 3… in the order accepted, and the `queued as` of its 250 reply. */
  id: number;
  /** The envelope sender (MAIL FROM); '' for the null sender `<>` of a bounce. */
  from: string;
  /** The envelope recipients the sink accepted (RCPT TO). */
  to: string[];
  raw: Buffer;
  /** It came over TLS (after STARTTLS). */
  tls: boolean;
  /** Epoch ms. */
  receivedAt: number;
}

export interface SmtpSinkStats {
  connections: { opened: number; open: number };
  auth: { accepted: number; refused: number };
  /** Answers to RCPT TO. */
  recipients: { accepted: number; deferred: number; rejected: number };
  /**
   * Messages accepted (250 after their data), deferred or refused after their data (by an `at:
   * 'data'` rule; refused also over the SIZE), dropped without an answer; retained: how many can be
   * read. Times: epoch ms of the first and latest accepted, null before one.
   */
  messages: {
    accepted: number;
    deferred: number;
    refused: number;
    dropped: number;
    retained: number;
    firstAt: number | null;
    lastAt: number | null;
  };
  /**
   * Every answer the sink decided (AUTH, RCPT TO and the end of each message's data) by class;
   * protocol errors smtp-server answers itself are not counted.
   */
  replies: { '2xx': number; '4xx': number; '5xx': number };
}

export interface SmtpSink {
  port: number;
  /** The control port; null when started without one. */
  httpPort: number | null;
  /** Accepted messages, oldest first: those with `to` among their recipients (any case), the latest `limit` of them. */
  received(filter?: { to?: string; limit?: number }): ReceivedMail[];
  rules(): SmtpRuleView[];
  /** Replaces every rule (their counts start again); throws RangeError for a malformed one, changing nothing. */
  setRules(rules: SmtpRule[]): void;
  faults(): SmtpFaults;
  /** Changes the faults given (the drop count starts again); throws RangeError for a bad value, changing nothing. */
  setFaults(faults: Partial<SmtpFaults>): void;
  stats(): SmtpSinkStats;
  /** Forgets the messages kept; the counters stay. */
  clear(): void;
  /** Forgets the messages, zeroes the counters and the rules' counts. */
  reset(): void;
  /**
   * Sends a DSN (from the null sender to the message's envelope sender, its VERP address) or an
   * ARF report (to the feedback mailbox at that address's domain) about the latest kept message
   * that matches; answers what it sent. Rejects with RangeError for a bad request, NotReceived
   * when no kept message matches, ReportRefused when the destination does not take it.
   */
  report(request: ReportRequest): Promise<SentReport>;
  close(): Promise<void>;
}

const DEFER_DEFAULT = { code: 451, status: '4.3.0', text: 'try again later' };
const REJECT_DEFAULT = { code: 550, status: '5.1.1', text: 'user unknown' };
/** Texts for the codes a rule most often gives, when it names none. */
const REPLY_TEXT: Record<number, string> = {
  421: 'service not available',
  450: 'mailbox unavailable',
  451: 'try again later',
  452: 'insufficient system storage',
  550: 'mailbox unavailable',
  551: 'user not local',
  552: 'mailbox full',
  553: 'mailbox name not allowed',
  554: 'transaction failed',
};
const ENHANCED_STATUS = /^([245])\.\d{1,3}\.\d{1,3}$/;
const MAX_TEXT = 400;

interface Rule {
  view: Omit<SmtpRuleView, 'used'>;
  matches(address: string): boolean;
  /** For defer and reject: the error smtp-server turns into the reply. */
  reply?: { code: number; message: string };
  times: number;
  /** defer: attempts so far by address (lower case). */
  attempts: Map<string, number>;
  used: number;
}

function wholeNumber(name: string, value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0)
    throw new RangeError(`${name} must be a whole number, not ${String(value)}`);
  return value;
}

/** A `/pattern/flags` string as a RegExp; undefined for anything else (an address). */
function patternOf(match: string): RegExp | undefined {
  const written = /^\/(.+)\/([a-z]*)$/s.exec(match);
  if (!written) return undefined;
  try {
    return new RegExp(written[1], written[2]);
  } catch {
    throw new RangeError(`match ${match} is not a valid regular expression`);
  }
}

/** A rule checked and made ready to answer with; RangeError says what is wrong with it. */
function compile(rule: SmtpRule): Rule {
  if (typeof rule !== 'object' || rule === null) throw new RangeError('a rule must be an object');
  const { match, action } = rule;
  let matches: (address: string) => boolean;
  if (match instanceof RegExp) {
    const pattern = new RegExp(match.source, match.flags.replace(/[gy]/g, '')); // stateless test()
    matches = (address) => pattern.test(address);
  } else if (typeof match === 'string' && match !== '') {
    const pattern = patternOf(match);
    const address = match.toLowerCase();
    matches = pattern ? (candidate) => pattern.test(candidate) : (candidate) => candidate.toLowerCase() === address;
  } else {
    throw new RangeError('match must be an address or a /regular expression/');
  }
  const shown = match instanceof RegExp ? String(match) : match;
  const at = rule.at ?? 'rcpt';
  if (at !== 'rcpt' && at !== 'data') throw new RangeError(`at must be rcpt or data, not ${String(at)}`);
  if (action === 'accept')
    return { view: { match: shown, action, at }, matches, times: 0, attempts: new Map(), used: 0 };
  if (action !== 'defer' && action !== 'reject')
    throw new RangeError(`action must be accept, defer or reject, not ${String(action)}`);

  const defaults = action === 'defer' ? DEFER_DEFAULT : REJECT_DEFAULT;
  const code = wholeNumber('code', rule.code, defaults.code);
  const [lowest, highest] = action === 'defer' ? [400, 499] : [400, 599];
  if (code < lowest || code > highest)
    throw new RangeError(`a ${action} rule's code must be from ${lowest} to ${highest}, not ${code}`);
  const status = rule.status ?? (rule.code === undefined ? defaults.status : undefined);
  if (status !== undefined) {
    const valid = typeof status === 'string' ? ENHANCED_STATUS.exec(status) : null;
    if (!valid) throw new RangeError(`status must be an enhanced status code like 5.1.1, not ${String(status)}`);
    if (valid[1] !== String(code)[0]) throw new RangeError(`status ${status} is not of the class of code ${code}`);
  }
  const text =
    rule.text ??
    (rule.code === undefined ? defaults.text : (REPLY_TEXT[code] ?? (action === 'defer' ? 'deferred' : 'refused')));
  // biome-ignore lint/suspicious/noControlCharactersInRegex: a control character is what makes text not one line
  if (typeof text !== 'string' || text === '' || text.length > MAX_TEXT || /[\x00-\x1f\x7f]/.test(text)) {
    throw new RangeError(`text must be one line of 1 to ${MAX_TEXT} characters`);
  }
  const times = action === 'defer' ? wholeNumber('times', rule.times, 1) : 0;
  if (action === 'defer' && times < 1) throw new RangeError('a defer rule needs times of at least 1');
  // smtp-server writes no enhanced code of its own (ENHANCEDSTATUSCODES stays off, below),
  // so the reply is exactly `code status text`.
  const message = status === undefined ? text : `${status} ${text}`;
  const view = { match: shown, action, at, ...(action === 'defer' ? { times } : {}), reply: `${code} ${message}` };
  return { view, matches, reply: { code, message }, times, attempts: new Map(), used: 0 };
}

function compileAll(rules: unknown): Rule[] {
  if (!Array.isArray(rules)) throw new RangeError('rules must be a list');
  return rules.map((rule, index) => {
    try {
      return compile(rule as SmtpRule);
    } catch (error) {
      if (error instanceof RangeError) throw new RangeError(`rule ${index + 1}: ${error.message}`);
      throw error;
    }
  });
}

function checkedFaults(faults: Partial<SmtpFaults>, current: SmtpFaults): SmtpFaults {
  if (faults.dropRepeat !== undefined && typeof faults.dropRepeat !== 'boolean')
    throw new RangeError('dropRepeat must be true or false');
  return {
    dropAfter: wholeNumber('dropAfter', faults.dropAfter, current.dropAfter),
    dropRepeat: faults.dropRepeat ?? current.dropRepeat,
    delayMs: wholeNumber('delayMs', faults.delayMs, current.delayMs),
  };
}

/** An error smtp-server answers with `code message`. */
function replyError(code: number, message: string): Error {
  return Object.assign(new Error(message), { responseCode: code });
}

export async function startSmtpSink(options: SmtpSinkOptions = {}): Promise<SmtpSink> {
  const now = options.now ?? Date.now;
  const retain = wholeNumber('retain', options.retain, 100_000);
  const maxSize = wholeNumber('maxSize', options.maxSize, 50 * 1024 * 1024);
  if ((options.user === undefined) !== (options.password === undefined))
    throw new RangeError('user and password go together');
  const reportTo = options.reportTo && reportDestination(options.reportTo.host, options.reportTo.port);
  let rules = compileAll(options.rules ?? []);
  let faults = checkedFaults(options, { dropAfter: 0, dropRepeat: false, delayMs: 0 });
  let messages = new Ring<ReceivedMail>(Math.max(retain, 1));
  let stats = freshStats();
  let nextId = 1;
  /** Messages accepted since the last drop (or since the faults were set). */
  let acceptedSinceDrop = 0;
  let dropped = false;

  function freshStats() {
    return {
      connectionsOpened: 0,
      auth: { accepted: 0, refused: 0 },
      recipients: { accepted: 0, deferred: 0, rejected: 0 },
      messages: {
        accepted: 0,
        deferred: 0,
        refused: 0,
        dropped: 0,
        firstAt: null as number | null,
        lastAt: null as number | null,
      },
      replies: { '2xx': 0, '4xx': 0, '5xx': 0 },
    };
  }
  const count = (code: number) => stats.replies[code < 300 ? '2xx' : code < 500 ? '4xx' : '5xx']++;

  // Raw sockets by the client's port, to drop a connection without a word (smtp-server
  // offers no way to close without answering) and to end them all at once on close.
  const sockets = new Map<number, Socket>();

  /**
   * The reply a transaction's data gets from an `at: 'data'` rule one of its recipients matched;
   * the first such wins.
   */
  const dataReplies = new WeakMap<SMTPServerSession, { code: number; message: string }>();

  function onRcptTo(address: { address: string }, session: SMTPServerSession, callback: (error?: Error) => void): void {
    const rule = rules.find((candidate) => candidate.matches(address.address));
    if (rule) rule.used++;
    let reply = rule?.reply;
    if (rule && reply && rule.view.action === 'defer') {
      const key = address.address.toLowerCase();
      const attempts = (rule.attempts.get(key) ?? 0) + 1;
      rule.attempts.set(key, attempts);
      if (attempts > rule.times) reply = undefined;
    }
    if (reply && rule!.view.at === 'data') {
      if (!dataReplies.has(session)) dataReplies.set(session, reply);
    } else if (reply) {
      stats.recipients[reply.code < 500 ? 'deferred' : 'rejected']++;
      count(reply.code);
      callback(replyError(reply.code, reply.message));
      return;
    }
    stats.recipients.accepted++;
    count(250);
    callback();
  }

  function onData(
    stream: SMTPServerDataStream,
    session: SMTPServerSession,
    callback: (error?: Error | null, message?: string) => void,
  ): void {
    const chunks: Buffer[] = [];
    if (retain > 0) stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    else stream.resume();
    stream.once('end', () => {
      if (stream.sizeExceeded) {
        // smtp-server answers 552 itself, whatever the callback says.
        stats.messages.refused++;
        count(552);
        return callback(replyError(552, 'message exceeds fixed maximum message size'));
      }
      const answer = () => {
        const reply = dataReplies.get(session);
        if (reply) {
          stats.messages[reply.code < 500 ? 'deferred' : 'refused']++;
          count(reply.code);
          return callback(replyError(reply.code, reply.message));
        }
        if (faults.dropAfter > 0 && !(dropped && !faults.dropRepeat) && acceptedSinceDrop >= faults.dropAfter) {
          dropped = true;
          acceptedSinceDrop = 0;
          stats.messages.dropped++;
          sockets.get(session.remotePort)?.destroy();
          return;
        }
        acceptedSinceDrop++;
        const receivedAt = now();
        const id = nextId++;
        stats.messages.accepted++;
        stats.messages.firstAt ??= receivedAt;
        stats.messages.lastAt = receivedAt;
        if (retain > 0) {
          const mailFrom = session.envelope.mailFrom;
          messages.push({
            id,
            from: mailFrom ? mailFrom.address : '',
            to: session.envelope.rcptTo.map((rcpt) => rcpt.address),
            raw: Buffer.concat(chunks),
            tls: session.secure,
            receivedAt,
          });
        }
        count(250);
        callback(null, `OK: queued as ${id}`);
      };
      if (faults.delayMs > 0) setTimeout(answer, faults.delayMs);
      else answer();
    });
  }

  const server = new SMTPServer({
    name: 'herald-sim',
    banner: 'Herald SMTP sink',
    logger: false,
    disableReverseLookup: true,
    size: maxSize,
    // Off, so that a rule's reply carries its enhanced code exactly as given: on, smtp-server
    // would put its own code for the reply code (5.6.0 for any 554) in front of it.
    hideENHANCEDSTATUSCODES: true,
    ...(options.tls ? { key: options.tls.key, cert: options.tls.cert } : { disabledCommands: ['STARTTLS'] }),
    authOptional: options.user === undefined,
    // A development sink listens on a local port, with STARTTLS only when given a certificate.
    allowInsecureAuth: true,
    onAuth(auth, _session, callback) {
      if (options.user !== undefined && (auth.username !== options.user || auth.password !== options.password)) {
        stats.auth.refused++;
        count(535);
        return callback(replyError(535, 'authentication credentials invalid'));
      }
      stats.auth.accepted++;
      count(235);
      callback(null, { user: auth.username });
    },
    onMailFrom(_address, session, callback) {
      dataReplies.delete(session); // a new transaction on the connection
      callback();
    },
    onRcptTo,
    onData,
  });
  server.on('error', () => {}); // a client's reset or failed handshake ends only its connection
  server.server.on('connection', (socket: Socket) => {
    const port = socket.remotePort!;
    stats.connectionsOpened++;
    sockets.set(port, socket);
    socket.once('close', () => sockets.delete(port));
  });

  const received = (filter: { to?: string; limit?: number } = {}): ReceivedMail[] => {
    if (retain === 0) return [];
    let list = messages.values();
    if (filter.to !== undefined) {
      const to = filter.to.toLowerCase();
      list = list.filter((mail) => mail.to.some((address) => address.toLowerCase() === to));
    }
    const limit = wholeNumber('limit', filter.limit, list.length);
    return limit < list.length ? list.slice(list.length - limit) : list;
  };
  const currentStats = (): SmtpSinkStats => ({
    connections: { opened: stats.connectionsOpened, open: sockets.size },
    auth: { ...stats.auth },
    recipients: { ...stats.recipients },
    messages: { ...stats.messages, retained: retain === 0 ? 0 : messages.size },
    replies: { ...stats.replies },
  });
  const sink: Omit<SmtpSink, 'port' | 'httpPort' | 'close'> = {
    received,
    rules: () => rules.map((rule) => ({ ...rule.view, used: rule.used })),
    setRules(next) {
      rules = compileAll(next);
    },
    faults: () => ({ ...faults }),
    setFaults(next) {
      faults = checkedFaults(next, faults);
      acceptedSinceDrop = 0;
      dropped = false;
    },
    stats: currentStats,
    clear() {
      messages = new Ring(Math.max(retain, 1));
    },
    reset() {
      messages = new Ring(Math.max(retain, 1));
      stats = freshStats();
      rules = rules.map((rule) => ({ ...rule, attempts: new Map(), used: 0 }));
      acceptedSinceDrop = 0;
      dropped = false;
    },
    report: (request) => reportOn(received, request, reportTo),
  };

  const host = options.host ?? '127.0.0.1';
  server.listen(options.port ?? 0, host);
  await once(server.server, 'listening');
  let control: Awaited<ReturnType<typeof startControl>> | undefined;
  if (options.httpPort !== null) {
    try {
      control = await startControl({ host, port: options.httpPort ?? 0, routes: smtpRoutes(sink) });
    } catch (error) {
      server.server.close();
      throw error;
    }
  }

  return {
    ...sink,
    port: (server.server.address() as AddressInfo).port,
    httpPort: control?.port ?? null,
    async close() {
      for (const socket of sockets.values()) socket.destroy();
      await Promise.all([new Promise<void>((resolve) => server.close(() => resolve())), control?.close()]);
    },
  };
}

/** A message as the control port shows it: the raw data as UTF-8 text. */
const mailView = (mail: ReceivedMail) => ({
  id: mail.id,
  from: mail.from,
  to: mail.to,
  tls: mail.tls,
  receivedAt: new Date(mail.receivedAt).toISOString(),
  size: mail.raw.length,
  raw: mail.raw.toString('utf8'),
});

/** A RangeError from the sink (a bad rule or value) as the control port's 400. */
function asBadRequest<T>(work: () => T): T {
  try {
    return work();
  } catch (error) {
    if (error instanceof RangeError) throw new BadRequest(error.message);
    throw error;
  }
}

/**
 * The SMTP sink's control routes:
 *
 *   GET    /messages?to=&limit=   accepted messages, oldest first, raw as text
 *   DELETE /messages              forgets them (the counters stay)
 *   GET    /rules                 the rules and how often each was used
 *   PUT    /rules {rules: [...]}  replaces them
 *   GET    /faults                drop and delay settings
 *   PUT    /faults {dropAfter?, dropRepeat?, delayMs?}
 *   GET    /stats                 counters, answers by class
 *   POST   /reset                 forgets the messages, zeroes the counters
 *   POST   /reports {kind, messageId?, to?, …}   sends a DSN or an ARF report about a message; 404 for none
 */
function smtpRoutes(sink: Omit<SmtpSink, 'port' | 'httpPort' | 'close'>): Routes {
  return {
    'GET /messages': (_, url) => {
      const limit = url.searchParams.get('limit');
      if (limit !== null && !/^\d+$/.test(limit)) throw new BadRequest('limit must be a whole number');
      const to = url.searchParams.get('to') ?? undefined;
      return {
        status: 200,
        body: { messages: sink.received({ to, limit: limit === null ? undefined : Number(limit) }).map(mailView) },
      };
    },
    'DELETE /messages': () => {
      sink.clear();
      return { status: 204 };
    },
    'GET /rules': () => ({ status: 200, body: { rules: sink.rules() } }),
    'PUT /rules': async (request) => {
      const body = await readJson(request);
      asBadRequest(() => sink.setRules(body.rules as SmtpRule[]));
      return { status: 200, body: { rules: sink.rules() } };
    },
    'GET /faults': () => ({ status: 200, body: sink.faults() }),
    'PUT /faults': async (request) => {
      const body = await readJson(request);
      asBadRequest(() => sink.setFaults(body));
      return { status: 200, body: sink.faults() };
    },
    'GET /stats': () => ({ status: 200, body: sink.stats() }),
    'POST /reset': () => {
      sink.reset();
      return { status: 204 };
    },
    'POST /reports': async (request) => {
      const body = await readJson(request);
      try {
        return { status: 200, body: await sink.report(body as unknown as ReportRequest) };
      } catch (error) {
        if (error instanceof RangeError) throw new BadRequest(error.message);
        if (error instanceof NotReceived) return { status: 404, body: { error: error.message } };
        // The next hop's failure, not the sink's: 502, with the SMTP reply when there was one.
        if (error instanceof ReportRefused) return { status: 502, body: { error: error.message, reply: error.reply } };
        throw error;
      }
    },
  };
}
