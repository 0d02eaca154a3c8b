import smpp from 'smpp';
import type { Log } from '../../../log.ts';
import { isUndecodable } from './framing.ts';

type Pdu = InstanceType<typeof smpp.PDU>;
type Session = InstanceType<typeof smpp.Session>;

export type BindState = 'down' | 'connecting' | 'bound' | 'closed';

/** One submit_sm handed to a bind: answered once, or lost with its bind. */
export interface BindSubmit {
  fields: Record<string, unknown>;
  answered(status: number, messageId: string): void;
  /** The bind went before an answer came: the SMSC may not have it, so it is sent again. */
  lost(): void;
}

export interface BindTiming {
  /** Answers (bind, submit, enquire_link) slower than this count the connection dead. Default 10 s. */
  responseTimeoutMs: number;
  /** An enquire_link this long after the last one, so an idle link that died is found. Default 30 s. */
  enquireLinkMs: number;
  /** Reconnection waits from this, doubling to reconnectMaxMs, each with jitter. Defaults 250 ms, 30 s. */
  reconnectBaseMs: number;
  reconnectMaxMs: number;
  /**
   * A throttled bind pauses from this, doubling to throttleMaxMs while the SMSC keeps throttling.
   * Defaults 50 ms, 2 s.
   */
  throttleBaseMs: number;
  throttleMaxMs: number;
}

export const DEFAULT_TIMING: BindTiming = {
  responseTimeoutMs: 10_000,
  enquireLinkMs: 30_000,
  reconnectBaseMs: 250,
  reconnectMaxMs: 30_000,
  throttleBaseMs: 50,
  throttleMaxMs: 2_000,
};

export interface BindOptions {
  name: string;
  host: string;
  port: number;
  tls: boolean;
  /** Over TLS: the CAs (PEM) the SMSC's certificate must chain to; unset, Node's own (and NODE_EXTRA_CA_CERTS). */
  ca: string | undefined;
  systemId: string;
  password: string;
  timing: BindTiming;
  random: () => number;
  /** Monotonic milliseconds (performance.now): pauses and timeouts, not dates. */
  monotonic: () => number;
  log: Log;
  /** The bind can take submits (it bound, or a pause ended). */
  ready(): void;
  /** A deliver_sm: `respond` answers it with a command_status, once. */
  delivered(pdu: Pdu, respond: (status: number) => void): void;
}

interface Waiting {
  sentAt: number;
  submit: BindSubmit | undefined;
}

/**
 * Answers waiting to be written past which the bind reads no more PDUs until they are: an SMSC
 * that sends enquire_links (or anything owed an answer) faster than it reads the answers filled
 * the process's memory until it died.
 */
const WRITE_BACKLOG_BYTES = 1 << 20;

/** SMPP 3.4 §5.1.3: the PDU's length or body is wrong; and a receipt or message refused for good. */
const ESME_RINVCMDLEN = 0x02;
const ESME_RX_P_APPN = 0x65;

/**
 * One transceiver bind (SMPP 3.4 §4.1.5) and its connection: binds, keeps the link alive with
 * enquire_link, tells its submits' answers, and when the connection goes (closed, an answer
 * timed out, the SMSC unbound) hands every unanswered submit back and connects again after a
 * wait that doubles with each failure, jittered so that binds do not come back in step. The
 * `smpp` package encodes and decodes; the waiting, timeouts and reconnection are done here,
 * since it does none of them (ARCHITECTURE.md).
 */
export class SmppBind {
  state: BindState = 'down';
  /** Window slots taken: submits unanswered, counted by the transport (ResendBound counts until recorded). */
  inUse = 0;
  /** No submit before this (monotonic ms): the SMSC asked to slow down. */
  pausedUntil = 0;
  private readonly options: BindOptions;
  private session: Session | undefined;
  private readonly waiting = new Map<number, Waiting>();
  /** The sequence number of this connection's bind_transceiver, whose answer makes the bind. */
  private bindSequence = 0;
  /** When (monotonic ms) this connection began: bound within the response timeout, or connected again. */
  private connectingSince = 0;
  /** When (monotonic ms) this connection bound: a bind lost soon after does not start the waits again. */
  private boundAt: number | undefined;
  private failures = 0;
  private throttles = 0;
  private lastEnquiry = 0;
  /** When (monotonic ms) the bind was lost, until it is back: its return is told as its loss was. */
  private lostAt: number | undefined;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private pauseTimer: NodeJS.Timeout | undefined;
  private readonly sweepTimer: NodeJS.Timeout;

  constructor(options: BindOptions) {
    this.options = options;
    const { responseTimeoutMs, enquireLinkMs } = options.timing;
    this.sweepTimer = setInterval(() => this.sweep(), Math.min(1000, responseTimeoutMs / 4, enquireLinkMs));
  }

  get canSubmit(): boolean {
    return this.state === 'bound' && this.pausedUntil <= this.options.monotonic();
  }

  open(): void {
    if (this.state !== 'down') return;
    this.setState('connecting');
    this.connectingSince = this.options.monotonic();
    const { host, port, tls, ca, systemId, password } = this.options;
    const session = smpp.connect({ host, port, tls, ca });
    this.session = session;
    // A passcode's submit_sm is one small write: under Nagle's algorithm it waited for the
    // SMSC to acknowledge whatever this bind sent before it (a submit, a deliver_sm_resp).
    session.socket.setNoDelay(true);
    // Between the TCP connection and the end of the TLS handshake, where an untrusted certificate fails.
    let handshaking = false;
    // Why the link ended, for lose()'s one warning a spell: a refused reconnection is not another.
    let failure: string | undefined;
    session.on('error', (error: NodeJS.ErrnoException) => {
      if (this.session !== session) return;
      if (handshaking) {
        this.options.log.error(
          { bind: this.options.name, error: error.message, code: error.code },
          'SMPP over TLS: the handshake with the SMSC failed, so no bind and no submit (its certificate must ' +
            'be trusted: a private CA goes in ?ca= or NODE_EXTRA_CA_CERTS)',
        );
      } else {
        failure = `SMPP connection error: ${error.message}`;
        // The smpp package reads nothing more after a PDU it could not parse: the link is done.
        session.destroy();
      }
    });
    session.on('close', () => this.lose(session, failure ?? 'the connection closed'));
    session.on('pdu', (pdu: Pdu) => this.onPdu(session, pdu));
    if (tls) session.once('connect', () => (handshaking = true));
    session.once(tls ? 'secureConnect' : 'connect', () => {
      handshaking = false;
      this.bindSequence =
        this.request(
          session,
          new smpp.PDU('bind_transceiver', { system_id: systemId, password, interface_version: 0x34 }),
        ) ?? 0;
    });
  }

  /** Sends a submit_sm; false when the bind cannot take it now (the caller keeps it). */
  submit(submit: BindSubmit): boolean {
    const session = this.session;
    if (this.state !== 'bound' || !session) return false;
    if (this.request(session, new smpp.PDU('submit_sm', submit.fields), submit) !== undefined) return true;
    // The SMSC ended the connection and its close is still to come: the bind takes nothing
    // more (else the caller would hand the part straight back to it, round and round).
    this.setState('down');
    session.destroy();
    return false;
  }

  /** The SMSC throttled: pause, longer the more it keeps doing so. */
  slowDown(): void {
    const { throttleBaseMs, throttleMaxMs } = this.options.timing;
    const pause = Math.min(throttleMaxMs, throttleBaseMs * 2 ** this.throttles);
    this.throttles = Math.min(this.throttles + 1, 30);
    this.pausedUntil = this.options.monotonic() + pause;
    clearTimeout(this.pauseTimer);
    this.pauseTimer = setTimeout(() => this.options.ready(), pause);
  }

  /** A submit went through: the next throttle pauses from the start again. */
  accepted(): void {
    this.throttles = 0;
  }

  /** Unbinds (waiting for the answer at most the response timeout) and stays down. */
  async close(): Promise<void> {
    const session = this.session;
    this.setState('closed');
    clearInterval(this.sweepTimer);
    clearTimeout(this.reconnectTimer);
    clearTimeout(this.pauseTimer);
    if (!session) return;
    const closed = new Promise<void>((resolve) => session.socket.once('close', () => resolve()));
    if (session.socket.writable) {
      const answered = new Promise<void>((resolve) => session.unbind(() => resolve()));
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<void>(
        (resolve) => (timer = setTimeout(resolve, this.options.timing.responseTimeoutMs)),
      );
      await Promise.race([answered, timeout, closed]);
      clearTimeout(timer);
    }
    session.destroy();
    await closed;
  }

  /** Sends a request and waits for its answer (sweep() times it out); undefined when the connection cannot take it. */
  private request(session: Session, pdu: Pdu, submit?: BindSubmit): number | undefined {
    if (!this.send(session, pdu)) return undefined;
    this.waiting.set(pdu.sequence_number, { sentAt: this.options.monotonic(), submit });
    return pdu.sequence_number;
  }

  /**
   * Writes a PDU; what else this tick sends goes in the same write. A page's submits, or the
   * answers to a group of receipts, were a system call each (with Nagle off, a TCP segment
   * each): corked until the next tick, they leave together, and a lone passcode waits for
   * nothing but the end of the tick.
   */
  private send(session: Session, pdu: Pdu): boolean {
    const { socket } = session;
    if (!socket.writableCorked) {
      socket.cork();
      process.nextTick(() => socket.uncork());
    }
    const sent = session.send(pdu);
    if (socket.writableLength > WRITE_BACKLOG_BYTES && !session.paused) {
      session.pause();
      socket.once('drain', () => session.resume());
    }
    return sent;
  }

  /**
   * A PDU whose body could not be decoded (framing.ts): a request is answered with an error, so the
   * SMSC does not offer it again for ever (a deliver_sm with a permanent application error); an
   * answer still settles its request, by the status and sequence number of its header.
   */
  private undecodable(session: Session, pdu: Pdu, reason: string, firstBytes: string): boolean {
    const fields = { bind: this.options.name, command: pdu.command, sequence: pdu.sequence_number, reason, firstBytes };
    this.options.log.warn(fields, 'the SMSC sent a PDU that cannot be decoded: answered with an error');
    if (pdu.isResponse()) return false;
    // An unknown command's is a generic_nack (the package's response()).
    const status = pdu.command === 'deliver_sm' ? ESME_RX_P_APPN : ESME_RINVCMDLEN;
    this.send(session, pdu.response({ command_status: status }));
    return true;
  }

  private onPdu(session: Session, pdu: Pdu): void {
    if (session !== this.session) return;
    if (isUndecodable(pdu) && this.undecodable(session, pdu, pdu.undecodable.reason, pdu.undecodable.firstBytes))
      return;
    if (this.state === 'connecting' && pdu.isResponse() && pdu.command !== 'bind_transceiver_resp') {
      // A generic_nack (an SMPP 3.3 SMSC's answer to bind_transceiver) or any other answer
      // under the bind's number refuses it, whatever its status: nothing else would end the wait.
      if (pdu.sequence_number === this.bindSequence) {
        const fields = { bind: this.options.name, command: pdu.command, status: pdu.command_status };
        this.options.log.warn(fields, 'the SMSC refused the bind');
        session.destroy();
        return;
      }
    }
    switch (pdu.command) {
      case 'deliver_sm': {
        if (pdu.short_message === undefined) {
          // Cut short before its message: nothing to read a receipt or a handset's text from.
          this.undecodable(session, pdu, 'its body ends before short_message', '');
          return;
        }
        let answered = false;
        this.options.delivered(pdu, (status) => {
          if (answered) return;
          answered = true;
          // After a reconnection the SMSC offers an unanswered deliver_sm again: no answer is owed on the new link.
          if (session === this.session && session.socket.writable)
            this.send(session, pdu.response({ command_status: status }));
        });
        return;
      }
      case 'enquire_link':
        this.send(session, pdu.response());
        return;
      case 'unbind':
        this.send(session, pdu.response());
        this.options.log.info({ bind: this.options.name }, 'the SMSC unbound');
        session.close();
        return;
      case 'bind_transceiver_resp':
        this.onBindAnswer(session, pdu);
        return;
      case 'submit_sm_resp':
      case 'generic_nack': {
        const waiting = this.waiting.get(pdu.sequence_number);
        if (!waiting) return;
        this.waiting.delete(pdu.sequence_number);
        // A generic_nack refuses, whatever its status says: the SMSC could not read the submit.
        const refused = pdu.command === 'generic_nack' && pdu.command_status === 0;
        waiting.submit?.answered(refused ? smpp.errors.ESME_RSYSERR : pdu.command_status, pdu.message_id ?? '');
        return;
      }
      default:
        if (pdu.isResponse()) {
          // enquire_link_resp, unbind_resp: their arrival is all that counts. Never a submit's:
          // only its own answer settles it.
          if (!this.waiting.get(pdu.sequence_number)?.submit) this.waiting.delete(pdu.sequence_number);
          return;
        }
        // A request Herald takes none of (data_sm, query_sm, a command unknown to SMPP 3.4): its
        // sequence number is the SMSC's own, so it says nothing of Herald's requests. Refused, so
        // the SMSC does not wait on it; alert_notification has no answer.
        if (pdu.command === 'alert_notification') return;
        this.send(
          session,
          `${pdu.command}_resp` in smpp.commands
            ? pdu.response({ command_status: smpp.errors.ESME_RINVCMDID })
            : new smpp.PDU('generic_nack', {
                sequence_number: pdu.sequence_number,
                command_status: smpp.errors.ESME_RINVCMDID,
              }),
        );
    }
  }

  private onBindAnswer(session: Session, pdu: Pdu): void {
    if (pdu.sequence_number !== this.bindSequence) return;
    this.waiting.delete(pdu.sequence_number);
    if (pdu.command_status !== 0) {
      this.options.log.warn({ bind: this.options.name, status: pdu.command_status }, 'the SMSC refused the bind');
      session.destroy();
      return;
    }
    this.boundAt = this.options.monotonic();
    this.lastEnquiry = this.boundAt;
    this.setState('bound');
    if (this.lostAt === undefined) {
      this.options.log.info({ bind: this.options.name }, 'SMPP bound');
    } else {
      const downForMs = Math.round(this.options.monotonic() - this.lostAt);
      this.options.log.warn({ bind: this.options.name, downForMs }, 'SMPP bind back');
      this.lostAt = undefined;
    }
    this.options.ready();
  }

  /** Answers overdue (the connection is dead) and the keep-alive, once every second or so. */
  private sweep(): void {
    const session = this.session;
    if (!session || this.state === 'closed') return;
    const now = this.options.monotonic();
    const { responseTimeoutMs, enquireLinkMs } = this.options.timing;
    if (this.state === 'connecting' && now - this.connectingSince >= responseTimeoutMs) {
      // Neither connected nor answered (a TLS handshake or a bind left hanging): connect again.
      this.options.log.warn({ bind: this.options.name }, 'the SMPP bind did not complete in time: reconnecting');
      session.destroy();
      return;
    }
    // Insertion order is sending order: the oldest first.
    for (const waiting of this.waiting.values()) {
      if (now - waiting.sentAt < responseTimeoutMs) break;
      this.options.log.warn({ bind: this.options.name }, 'an SMPP answer timed out: reconnecting');
      session.destroy();
      return;
    }
    if (this.state === 'bound' && now - this.lastEnquiry >= enquireLinkMs) {
      this.lastEnquiry = now;
      this.request(session, new smpp.PDU('enquire_link', {}));
    }
  }

  private lose(session: Session, reason: string): void {
    if (session !== this.session) return;
    this.session = undefined;
    const unanswered = [...this.waiting.values()].flatMap((waiting) => (waiting.submit ? [waiting.submit] : []));
    this.waiting.clear();
    if (this.state === 'closed') {
      for (const submit of unanswered) submit.lost();
      return;
    }
    const { reconnectBaseMs, reconnectMaxMs, responseTimeoutMs } = this.options.timing;
    // Only a bind that lasted starts the waits again: one an SMSC drops as soon as it is made
    // (a PDU that ends each connection) would otherwise be made again four times a second.
    if (this.boundAt !== undefined && this.options.monotonic() - this.boundAt >= responseTimeoutMs) this.failures = 0;
    this.boundAt = undefined;
    const ceiling = Math.min(reconnectMaxMs, reconnectBaseMs * 2 ** this.failures);
    this.failures = Math.min(this.failures + 1, 30);
    // Half the wait fixed, half random: binds lost together do not return together.
    const wait = ceiling / 2 + (this.options.random() * ceiling) / 2;
    const fields = { bind: this.options.name, reason, unanswered: unanswered.length, reconnectInMs: Math.round(wait) };
    // One warning a spell down, as for its return; each attempt that fails again is only news.
    if (this.lostAt === undefined) this.options.log.warn(fields, 'SMPP bind lost');
    else this.options.log.info(fields, 'SMPP bind still down');
    this.lostAt ??= this.options.monotonic();
    this.setState('down');
    for (const submit of unanswered) submit.lost();
    this.reconnectTimer = setTimeout(() => this.open(), wait);
  }

  private setState(state: BindState): void {
    if (this.state === 'closed' && state !== 'closed') return;
    this.state = state;
  }
}
