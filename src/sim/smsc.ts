/**
 * `herald sim smsc`: an SMPP 3.4 server standing in for an operator's SMSC in development,
 * benchmarks and tests. It answers binds, enquire_link and submit_sm, sends delivery
 * receipts and MO messages as deliver_sm, misbehaves on request (throttling, full queues,
 * refused numbers, dropped connections, receipts ahead of their submit_sm_resp), and shows
 * what it took on a small HTTP control port. Everything is in memory; nothing is logged per
 * message, so one core carries tens of thousands of submits a second.
 */
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { createServer as createTlsServer } from 'node:tls';
import { once } from 'node:events';
import { septetsOf, writeSeptets } from '../sms/gsm7.ts';
import { segment } from '../sms/segments.ts';
import {
  COMMAND,
  encodeDeliverSm,
  encodeResponse,
  MalformedPdu,
  pduSplitter,
  readBind,
  readHeader,
  readSubmit,
  RESPONSE_BIT,
  STATUS,
  type Deliver,
  type Header,
  type Submit,
} from './pdu.ts';
import { decodePart, reassemble, Ring, type MessageView, type TakenPart } from './taken.ts';
import { BadRequest, readJson, startControl, text, type Routes } from './control.ts';

export type IdFormat = 'hex' | 'decimal';

export const FINAL_STATES = ['DELIVRD', 'UNDELIV', 'REJECTD', 'EXPIRED', 'DELETED', 'UNKNOWN'] as const;
export type FinalState = (typeof FINAL_STATES)[number];
type ReceiptState = FinalState | 'ENROUTE';

export interface SmscOptions {
  /** SMPP port; 0 (the default here) picks a free one, which `port` then tells. */
  port?: number;
  /** Control HTTP port; 0 (the default here) picks a free one. */
  httpPort?: number;
  host?: string;
  /** SMPP over TLS with this certificate (PEM, its chain after it) and private key: what `smpps://` connects to. */
  tls?: { cert: string | Buffer; key: string | Buffer };
  /** When set, binds must carry this system_id and password; unset, any are accepted. */
  systemId?: string;
  password?: string;
  /** How submit_sm_resp writes message ids. Default decimal. */
  idFormat?: IdFormat;
  /** How the receipt text's `id:` writes them, when an SMSC mixes notations. Default: idFormat. */
  receiptIdFormat?: IdFormat;
  /** Zero-pad ids to this many digits. Default 0 (no padding). */
  idWidth?: number;
  firstId?: number;
  /** From submit_sm_resp to the final receipt. Default 1000. */
  receiptDelayMs?: number;
  /**
   * Keep the final receipts, instead of sending them receiptDelayMs after the response, until
   * `releaseReceipts` sends them: a test sees what comes before them without racing a timer.
   */
  holdReceipts?: boolean;
  /** Shares of final receipt states; DELIVRD takes what the others leave. Default all DELIVRD. */
  outcomes?: Partial<Record<FinalState, number>>;
  /** Send an ENROUTE intermediate receipt (esm_class 0x20) right after the response, before the final one. */
  enroute?: boolean;
  /** Send the receipt (at once) before the submit_sm_resp it belongs to, as some SMSCs' races do. */
  receiptBeforeResponse?: boolean;
  /** Submits a second each bind may make; above it, ESME_RTHROTTLED. 0 (default): no limit. */
  tps?: number;
  /**
   * Submits a second one system_id may make across all its binds, as operators' contracts count;
   * above it, ESME_RTHROTTLED. 0 (default): no limit.
   */
  accountTps?: number;
  /** Share of submits answered ESME_RTHROTTLED whatever the rate. */
  throttledShare?: number;
  /** Share of submits answered ESME_RMSGQFUL. */
  queueFullShare?: number;
  /** Destinations refused with `rejectStatus` (a permanent error). */
  rejectDestinations?: RegExp;
  /** Default ESME_RINVDSTADR (0x0B). */
  rejectStatus?: number;
  /** Close each connection after answering its Nth submit_sm. 0 (default): never. */
  dropAfterSubmits?: number;
  /** GSM-7 (data_coding 0) as packed septets rather than one a byte, for reading and for MO. */
  gsm7Packed?: boolean;
  /** How many accepted parts the read endpoint keeps (the latest). Default 100,000. */
  retain?: number;
  /** Clock in epoch milliseconds, for the TPS limit and the receipt dates. */
  now?: () => number;
  /** Uniform in [0, 1), for outcomes and the refusal shares. */
  random?: () => number;
}

export interface MoRequest {
  from: string;
  to: string;
  text: string;
  /** Which ESME gets it; default: whichever is bound to receive. */
  systemId?: string;
}

export interface SmscStats {
  binds: { accepted: number; refused: number; open: number };
  submits: {
    received: number;
    accepted: number;
    throttled: number;
    queueFull: number;
    rejected: number;
    invalid: number;
  };
  deliverSm: { sent: number; acknowledged: number; refused: number; waiting: number; receipts: number; mo: number };
  enquireLinks: number;
  drops: number;
}

export interface Smsc {
  port: number;
  httpPort: number;
  /** What GET /messages answers: accepted submits reassembled, oldest first. */
  received(recipient?: string): MessageView[];
  /** What GET /arrivals answers: each recipient with the time (epoch ms) the first part for it arrived. */
  arrivals(): Array<[string, number]>;
  stats(): SmscStats;
  /** Send an MO message; false when no bind can receive it. */
  sendMo(request: MoRequest): boolean;
  /** Under holdReceipts, sends the `count` (default: all) final receipts held longest; how many it sent. */
  releaseReceipts(count?: number): number;
  reset(): void;
  close(): Promise<void>;
}

/** Receipt `err:` values: GSM MAP causes a real network would give for these states. */
const ERROR_CODE: Record<ReceiptState, string> = {
  ENROUTE: '000',
  DELIVRD: '000',
  UNDELIV: '001',
  REJECTD: '011',
  EXPIRED: '027',
  DELETED: '000',
  UNKNOWN: '000',
};
/** message_state TLV values (SMPP 3.4 §5.2.28). */
const MESSAGE_STATE: Record<ReceiptState, number> = {
  ENROUTE: 1,
  DELIVRD: 2,
  EXPIRED: 3,
  DELETED: 4,
  UNDELIV: 5,
  UNKNOWN: 7,
  REJECTD: 8,
};
const ESM_RECEIPT = 0x04;
/** SMPP 3.4 §5.2.12: an intermediate notification is its own message type, not a receipt. */
const ESM_INTERMEDIATE = 0x20;
const ESM_UDH = 0x40;
/** A deliver_sm the ESME refused is offered again after this long. */
const REDELIVER_MS = 1000;
/** The system_id the simulator answers binds with. */
const SMSC_SYSTEM_ID = 'HERALDSIM';

type BindKind = 'transmitter' | 'receiver' | 'transceiver';
const BIND_KIND: Record<number, BindKind> = {
  [COMMAND.bind_transmitter]: 'transmitter',
  [COMMAND.bind_receiver]: 'receiver',
  [COMMAND.bind_transceiver]: 'transceiver',
};

interface Session extends Bucket {
  socket: Socket;
  kind: BindKind | undefined;
  systemId: string;
  submits: number;
  sequence: number;
  /** deliver_sm sent and not yet answered, by sequence number: offered again if the bind goes. */
  unanswered: Map<number, Delivery>;
  closing: boolean;
  corked: boolean;
}

interface Delivery {
  systemId: string;
  pdu: Deliver;
}

/** Cumulative shares, DELIVRD last taking the rest: one comparison per state to pick an outcome. */
function outcomeTable(outcomes: Partial<Record<FinalState, number>>): Array<[FinalState, number]> {
  let sum = 0;
  const table: Array<[FinalState, number]> = [];
  for (const state of FINAL_STATES) {
    const share = outcomes[state];
    if (share === undefined) continue;
    if (!(share >= 0 && share <= 1)) throw new RangeError(`the share of ${state} must be from 0 to 1, not ${share}`);
    if (state === 'DELIVRD' || share === 0) continue;
    sum += share;
    table.push([state, sum]);
  }
  const total = sum + (outcomes.DELIVRD ?? 0);
  const exact = outcomes.DELIVRD !== undefined;
  if (exact ? Math.abs(total - 1) > 1e-9 : total > 1 + 1e-9)
    throw new RangeError(`the outcome shares add up to ${total}, not 1`);
  table.push(['DELIVRD', Infinity]);
  return table;
}

/** A bucket of `rate` tokens refilled at `rate` a second: a second's burst, then the rate. */
interface Bucket {
  tokens: number;
  refilledAt: number;
}

function share(name: string, value: number | undefined): number {
  if (value === undefined) return 0;
  if (!(value >= 0 && value <= 1)) throw new RangeError(`${name} must be from 0 to 1, not ${value}`);
  return value;
}

function wholeNumber(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`${name} must be a whole number, not ${value}`);
  return value;
}

const MINUTE_MS = 60_000;
let datedMinute = -1;
let dated = '';
/** YYMMDDhhmm, UTC: the receipt text's dates (SMPP 3.4 Appendix B); formatted once a minute, not per receipt. */
function receiptDate(epochMs: number): string {
  const minute = Math.floor(epochMs / MINUTE_MS);
  if (minute !== datedMinute) {
    datedMinute = minute;
    dated = new Date(minute * MINUTE_MS).toISOString().replace(/^..(..)-(..)-(..)T(..):(..).*$/, '$1$2$3$4$5');
  }
  return dated;
}

/** Unpacked GSM-7 of a receipt text; a character GSM-7 lacks (from the message's `text:`) becomes '?'. */
function gsmBytes(text: string): Buffer {
  let gsm = text;
  for (let i = 0; i < text.length; i++) {
    if (septetsOf(text.charCodeAt(i)) === 0) {
      gsm = text.replace(/./gs, (char) => (septetsOf(char.charCodeAt(0)) > 0 ? char : '?'));
      break;
    }
  }
  const out = Buffer.allocUnsafe(gsm.length * 2);
  return out.subarray(0, writeSeptets(gsm, 0, gsm.length, out, 0));
}

/** Sender and recipient TON/NPI of an MO: international/E.164 for digits, alphanumeric otherwise. */
const moAddress = (addr: string) => (/^\d+$/.test(addr) ? { ton: 1, npi: 1 } : { ton: 5, npi: 0 });

export async function startSmsc(options: SmscOptions = {}): Promise<Smsc> {
  const now = options.now ?? Date.now;
  const random = options.random ?? Math.random;
  const idFormat = options.idFormat ?? 'decimal';
  const receiptIdFormat = options.receiptIdFormat ?? idFormat;
  const idWidth = wholeNumber('idWidth', options.idWidth, 0);
  const receiptDelayMs = wholeNumber('receiptDelayMs', options.receiptDelayMs, 1000);
  const tps = wholeNumber('tps', options.tps, 0);
  const accountTps = wholeNumber('accountTps', options.accountTps, 0);
  const dropAfterSubmits = wholeNumber('dropAfterSubmits', options.dropAfterSubmits, 0);
  const throttledShare = share('throttledShare', options.throttledShare);
  const queueFullShare = share('queueFullShare', options.queueFullShare);
  const rejectStatus = options.rejectStatus ?? STATUS.ESME_RINVDSTADR;
  const outcomes = outcomeTable(options.outcomes ?? {});
  const gsm7Packed = options.gsm7Packed ?? false;
  const retain = wholeNumber('retain', options.retain, 100_000);
  if (retain < 1) throw new RangeError('retain must be at least 1');
  let nextId = wholeNumber('firstId', options.firstId, 1);
  let moReference = 0;

  const formatId = (id: number, format: IdFormat) =>
    (format === 'hex' ? id.toString(16) : String(id)).padStart(idWidth, '0');

  const sessions = new Set<Session>();
  /** Each system_id's bucket under accountTps. */
  const accounts = new Map<string, Bucket>();
  /** deliver_sm with no bind to take them yet, by system_id: handed over when one binds to receive. */
  const held = new Map<string, Delivery[]>();
  let taken = new Ring<TakenPart>(retain);
  let stats = freshStats();
  let closed = false;

  function freshStats() {
    return {
      binds: { accepted: 0, refused: 0 },
      submits: { received: 0, accepted: 0, throttled: 0, queueFull: 0, rejected: 0, invalid: 0 },
      deliverSm: { sent: 0, acknowledged: 0, refused: 0, receipts: 0, mo: 0 },
      enquireLinks: 0,
      drops: 0,
    };
  }

  // Everything written to a session in one turn of the event loop goes out in one write:
  // the answers to a chunk's PDUs, the receipts falling due together.
  const uncork = (session: Session) => {
    session.corked = false;
    session.socket.uncork();
  };
  const write = (session: Session, pdu: Buffer) => {
    if (session.closing) return;
    if (!session.corked) {
      session.corked = true;
      session.socket.cork();
      process.nextTick(uncork, session);
    }
    session.socket.write(pdu);
  };

  // Receipts waiting for their delay. One delay for all, so they fall due in the order they
  // were queued, and one timer serves them all: a timer each would send each on its own turn.
  const laterReceipts: Array<{ at: number; send: () => void }> = [];
  let nextDue = 0;
  let receiptTimer: NodeJS.Timeout | undefined;
  /** Under holdReceipts, the receipts releaseReceipts is yet to send, oldest first. */
  const heldReceipts: Array<() => void> = [];
  function later(send: () => void): void {
    if (options.holdReceipts) {
      heldReceipts.push(send);
      return;
    }
    laterReceipts.push({ at: performance.now() + receiptDelayMs, send });
    if (!receiptTimer) armReceiptTimer();
  }
  function armReceiptTimer(): void {
    receiptTimer = setTimeout(sendDueReceipts, Math.max(0, laterReceipts[nextDue].at - performance.now()));
    receiptTimer.unref();
  }
  function sendDueReceipts(): void {
    receiptTimer = undefined;
    const at = performance.now();
    while (nextDue < laterReceipts.length && laterReceipts[nextDue].at <= at) laterReceipts[nextDue++].send();
    if (nextDue === laterReceipts.length) {
      laterReceipts.length = 0;
      nextDue = 0;
    } else {
      if (nextDue > 4096) {
        laterReceipts.splice(0, nextDue);
        nextDue = 0;
      }
      armReceiptTimer();
    }
  }

  const respond = (session: Session, header: Header, status: number, body?: string) =>
    write(session, encodeResponse((header.commandId | RESPONSE_BIT) >>> 0, status, header.sequence, body));
  const nack = (session: Session, header: Header, status: number) =>
    write(session, encodeResponse(COMMAND.generic_nack, status, header.sequence));

  const canReceive = (session: Session) =>
    !session.closing && (session.kind === 'receiver' || session.kind === 'transceiver');

  function deliver(delivery: Delivery, preferred?: Session): void {
    if (closed) return;
    let target = preferred && canReceive(preferred) && preferred.systemId === delivery.systemId ? preferred : undefined;
    if (!target) {
      for (const session of sessions) {
        if (canReceive(session) && session.systemId === delivery.systemId) {
          target = session;
          break;
        }
      }
    }
    if (!target) {
      const queue = held.get(delivery.systemId) ?? [];
      queue.push(delivery);
      held.set(delivery.systemId, queue);
      return;
    }
    target.sequence = target.sequence >= 0x7fffffff ? 1 : target.sequence + 1;
    target.unanswered.set(target.sequence, delivery);
    stats.deliverSm.sent++;
    write(target, encodeDeliverSm(target.sequence, delivery.pdu));
  }

  function receipt(part: TakenPart, state: ReceiptState, id: number): Delivery {
    const snippet = (decodePart(part, gsm7Packed) ?? '').slice(0, 20);
    const text =
      `id:${formatId(id, receiptIdFormat)} sub:001 dlvrd:${state === 'DELIVRD' ? '001' : '000'} ` +
      `submit date:${receiptDate(part.receivedAt)} done date:${receiptDate(now())} ` +
      `stat:${state} err:${ERROR_CODE[state]} text:${snippet}`;
    return {
      systemId: part.systemId,
      pdu: {
        source: part.destination,
        destination: part.source,
        esmClass: state === 'ENROUTE' ? ESM_INTERMEDIATE : ESM_RECEIPT,
        dataCoding: 0,
        shortMessage: gsmBytes(text),
        receiptedMessageId: part.messageId,
        messageState: MESSAGE_STATE[state],
      },
    };
  }

  function sendReceipt(part: TakenPart, state: ReceiptState, id: number, session: Session): void {
    stats.deliverSm.receipts++;
    deliver(receipt(part, state, id), session);
  }

  /** The status a submit is refused with, or 0. */
  function refusal(session: Session, destination: string): number {
    if (tps > 0 && !tokenFrom(session, tps)) return STATUS.ESME_RTHROTTLED;
    if (accountTps > 0) {
      let account = accounts.get(session.systemId);
      if (!account) {
        account = { tokens: accountTps, refilledAt: now() };
        accounts.set(session.systemId, account);
      }
      if (!tokenFrom(account, accountTps)) return STATUS.ESME_RTHROTTLED;
    }
    if (throttledShare > 0 && random() < throttledShare) return STATUS.ESME_RTHROTTLED;
    if (queueFullShare > 0 && random() < queueFullShare) return STATUS.ESME_RMSGQFUL;
    if (options.rejectDestinations?.test(destination)) return rejectStatus;
    return 0;
  }

  /** Takes a token from the bucket; false when it has none. */
  function tokenFrom(bucket: Bucket, rate: number): boolean {
    const at = now();
    bucket.tokens = Math.min(rate, bucket.tokens + ((at - bucket.refilledAt) * rate) / 1000);
    bucket.refilledAt = at;
    if (bucket.tokens < 1) return false;
    bucket.tokens--;
    return true;
  }

  const counterOf: Record<number, 'throttled' | 'queueFull'> = {
    [STATUS.ESME_RTHROTTLED]: 'throttled',
    [STATUS.ESME_RMSGQFUL]: 'queueFull',
  };

  /** Answers a submit_sm; false when the connection is to drop after it. */
  function onSubmit(session: Session, header: Header, pdu: Buffer): boolean {
    stats.submits.received++;
    if (session.kind !== 'transmitter' && session.kind !== 'transceiver') {
      stats.submits.invalid++;
      respond(session, header, STATUS.ESME_RINVBNDSTS);
      return true;
    }
    const submit = readSubmit(pdu);
    session.submits++;
    const status = refusal(session, submit.destination.addr);
    if (status !== 0) {
      stats.submits[counterOf[status] ?? 'rejected']++;
      respond(session, header, status);
    } else {
      accept(session, header, submit);
    }
    return dropAfterSubmits === 0 || session.submits < dropAfterSubmits;
  }

  function accept(session: Session, header: Header, submit: Submit): void {
    stats.submits.accepted++;
    const id = nextId++;
    const draw = random();
    const outcome = outcomes.find(([, upTo]) => draw < upTo)![0];
    const part: TakenPart = {
      messageId: formatId(id, idFormat),
      systemId: session.systemId,
      source: submit.source,
      destination: submit.destination,
      esmClass: submit.esmClass,
      dataCoding: submit.dataCoding,
      registeredDelivery: submit.registeredDelivery,
      shortMessage: Buffer.from(submit.message),
      sar: submit.sar,
      receivedAt: now(),
      outcome,
    };
    taken.push(part);
    // registered_delivery bits 0–1 (SMPP 3.4 §5.2.17): 1 a receipt always, 2 on failure
    // only, 3 (SMPP 5.0) on success only. ENROUTE goes to any submit that asks for one.
    const asked = submit.registeredDelivery & 0x03;
    const final = asked === 1 || (asked === 2 && outcome !== 'DELIVRD') || (asked === 3 && outcome === 'DELIVRD');
    const enroute = options.enroute === true && asked !== 0;
    const response = () => respond(session, header, STATUS.ESME_ROK, part.messageId);
    if (options.receiptBeforeResponse) {
      if (enroute) sendReceipt(part, 'ENROUTE', id, session);
      if (final) sendReceipt(part, outcome, id, session);
      response();
      return;
    }
    response();
    if (enroute) sendReceipt(part, 'ENROUTE', id, session);
    if (final) later(() => sendReceipt(part, outcome, id, session));
  }

  function onBind(session: Session, header: Header, pdu: Buffer): void {
    if (session.kind) {
      respond(session, header, STATUS.ESME_RALYBND);
      return;
    }
    const { systemId, password } = readBind(pdu);
    const status =
      options.systemId !== undefined && systemId !== options.systemId
        ? STATUS.ESME_RINVSYSID
        : options.password !== undefined && password !== options.password
          ? STATUS.ESME_RINVPASWD
          : 0;
    if (status !== 0) {
      stats.binds.refused++;
      respond(session, header, status);
      return;
    }
    stats.binds.accepted++;
    session.kind = BIND_KIND[header.commandId];
    session.systemId = systemId;
    session.tokens = tps;
    session.refilledAt = now();
    respond(session, header, STATUS.ESME_ROK, SMSC_SYSTEM_ID);
    const waiting = held.get(systemId);
    if (waiting && canReceive(session)) {
      held.delete(systemId);
      for (const delivery of waiting) deliver(delivery, session);
    }
  }

  function onDeliverResponse(session: Session, header: Header): void {
    const delivery = session.unanswered.get(header.sequence);
    if (!delivery) return;
    session.unanswered.delete(header.sequence);
    if (header.status === 0) {
      stats.deliverSm.acknowledged++;
    } else {
      stats.deliverSm.refused++;
      setTimeout(() => deliver(delivery), REDELIVER_MS).unref();
    }
  }

  function hangUp(session: Session): void {
    session.closing = true;
    session.socket.end();
  }

  /** Handles one inbound PDU; false stops reading the connection (it is closing). */
  function onPdu(session: Session, pdu: Buffer): boolean {
    const header = readHeader(pdu);
    try {
      switch (header.commandId) {
        case COMMAND.submit_sm:
          if (onSubmit(session, header, pdu)) return true;
          stats.drops++;
          hangUp(session);
          return false;
        case COMMAND.deliver_sm_resp:
          onDeliverResponse(session, header);
          return true;
        case COMMAND.enquire_link:
          stats.enquireLinks++;
          respond(session, header, STATUS.ESME_ROK);
          return true;
        case COMMAND.bind_transmitter:
        case COMMAND.bind_receiver:
        case COMMAND.bind_transceiver:
          onBind(session, header, pdu);
          return true;
        case COMMAND.unbind:
          respond(session, header, STATUS.ESME_ROK);
          hangUp(session);
          return false;
        default:
          // Responses the simulator does not wait for (enquire_link_resp, generic_nack…) need no answer.
          if (!(header.commandId & RESPONSE_BIT)) nack(session, header, STATUS.ESME_RINVCMDID);
          return true;
      }
    } catch (error) {
      if (!(error instanceof MalformedPdu)) throw error;
      if (header.commandId === COMMAND.submit_sm) stats.submits.invalid++;
      nack(session, header, STATUS.ESME_RINVCMDLEN);
      return true;
    }
  }

  const onConnection = (socket: Socket) => {
    const session: Session = {
      socket,
      kind: undefined,
      systemId: '',
      submits: 0,
      tokens: 0,
      refilledAt: 0,
      sequence: 0,
      unanswered: new Map(),
      closing: false,
      corked: false,
    };
    sessions.add(session);
    socket.setNoDelay(true);
    const split = pduSplitter((pdu) => onPdu(session, pdu));
    socket.on('data', (chunk: Buffer) => {
      if (session.closing) return;
      try {
        split(chunk);
      } catch (error) {
        if (!(error instanceof MalformedPdu)) throw error;
        socket.destroy();
      }
    });
    socket.on('error', () => {}); // a peer's reset ends the session like a close
    socket.on('close', () => {
      session.closing = true;
      sessions.delete(session);
      for (const delivery of session.unanswered.values()) deliver(delivery);
      session.unanswered.clear();
    });
  };
  // Over TLS a session starts once the handshake is done; one that fails (a client refusing
  // the certificate) ends there, with nothing to clean up.
  const server: Server = options.tls
    ? createTlsServer({ cert: options.tls.cert, key: options.tls.key }, onConnection)
    : createServer(onConnection);

  function sendMo({ from, to, text, systemId }: MoRequest): boolean {
    let target: string | undefined = systemId;
    let receiving = false;
    for (const session of sessions) {
      if (canReceive(session) && (target === undefined || session.systemId === target)) {
        target = session.systemId;
        receiving = true;
        break;
      }
    }
    if (!receiving || target === undefined) return false;
    moReference = (moReference + 1) & 0xff;
    const { encoding, parts } = segment(text, { reference: moReference, packed: gsm7Packed });
    for (const part of parts) {
      stats.deliverSm.mo++;
      deliver({
        systemId: target,
        pdu: {
          source: { ...moAddress(from), addr: from },
          destination: { ...moAddress(to), addr: to },
          esmClass: part.udh.length > 0 ? ESM_UDH : 0,
          dataCoding: encoding === 'GSM-7' ? 0 : 8,
          shortMessage: part.shortMessage,
        },
      });
    }
    return true;
  }

  const received = (recipient?: string) =>
    reassemble(
      recipient === undefined ? taken.values() : taken.values().filter((part) => part.destination.addr === recipient),
      gsm7Packed,
    );

  /** When the first part for each recipient arrived, oldest first: what a bench times, without every message's view. */
  const arrivals = (): Array<[string, number]> => {
    const first = new Map<string, number>();
    for (const part of taken.values())
      if (!first.has(part.destination.addr)) first.set(part.destination.addr, part.receivedAt);
    return [...first];
  };

  function currentStats(): SmscStats {
    let waiting = 0;
    for (const queue of held.values()) waiting += queue.length;
    let open = 0;
    for (const session of sessions) {
      waiting += session.unanswered.size;
      if (session.kind) open++;
    }
    return { ...stats, binds: { ...stats.binds, open }, deliverSm: { ...stats.deliverSm, waiting } };
  }

  function releaseReceipts(count = heldReceipts.length): number {
    const released = heldReceipts.splice(0, count);
    for (const send of released) send();
    return released.length;
  }

  function reset(): void {
    taken = new Ring(retain);
    stats = freshStats();
  }

  const host = options.host ?? '127.0.0.1';
  server.listen(options.port ?? 0, host);
  await once(server, 'listening');
  let control: Awaited<ReturnType<typeof startControl>>;
  try {
    control = await startControl({
      host,
      port: options.httpPort ?? 0,
      routes: smscRoutes({ received, arrivals, stats: currentStats, sendMo, reset }),
    });
  } catch (error) {
    server.close();
    throw error;
  }

  return {
    port: (server.address() as AddressInfo).port,
    httpPort: control.port,
    received,
    arrivals,
    stats: currentStats,
    sendMo,
    releaseReceipts,
    reset,
    async close() {
      closed = true;
      clearTimeout(receiptTimer);
      for (const session of sessions) session.socket.destroy();
      await Promise.all([new Promise((resolve) => server.close(resolve)), control.close()]);
    },
  };
}

/**
 * The SMSC simulator's control routes:
 *
 *   GET  /messages?recipient=   what it took, reassembled, oldest first
 *   GET  /arrivals              each recipient and when its first part arrived
 *   GET  /stats                 counters
 *   POST /mo {from, to, text, systemId?}   an MO message to a bound receiver (409 if none)
 *   POST /reset                 forgets what it took and zeroes the counters
 */
function smscRoutes(smsc: Pick<Smsc, 'received' | 'arrivals' | 'stats' | 'sendMo' | 'reset'>): Routes {
  return {
    'GET /messages': (_, url) => ({
      status: 200,
      body: { messages: smsc.received(url.searchParams.get('recipient') ?? undefined) },
    }),
    'GET /arrivals': () => ({ status: 200, body: { arrivals: smsc.arrivals() } }),
    'GET /stats': () => ({ status: 200, body: smsc.stats() }),
    'POST /mo': async (request) => {
      const body = await readJson(request);
      const mo = {
        from: text(body, 'from', true)!,
        to: text(body, 'to', true)!,
        text: text(body, 'text', true)!,
        systemId: text(body, 'systemId', false),
      };
      let sent: boolean;
      try {
        sent = smsc.sendMo(mo);
      } catch (error) {
        if (error instanceof RangeError) throw new BadRequest(error.message); // a text beyond 255 parts
        throw error;
      }
      return sent
        ? { status: 202, body: { sent: true } }
        : { status: 409, body: { error: 'no bind can receive it: bind a receiver or transceiver first' } };
    },
    'POST /reset': () => {
      smsc.reset();
      return { status: 204 };
    },
  };
}
