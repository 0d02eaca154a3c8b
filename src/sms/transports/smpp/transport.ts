import type { Registry } from 'prom-client';
import type { Clock } from '../../../clock.ts';
import type { Database } from '../../../db/database.ts';
import { inBackground } from '../../../db/priority.ts';
import { silentLog, type Log } from '../../../log.ts';
import {
  DEFAULT_SMSC,
  type OutgoingSms,
  type ReceiveInboundSms,
  type SmsTransport,
  type SubmitOptions,
  type SubmitResult,
} from '../../transport.ts';
import { DEFAULT_TIMING, SmppBind, type BindTiming } from './bind.ts';
import { GroupWriter } from './group-writer.ts';
import {
  answeredBefore,
  applySmppReceipts,
  recordSmppAnswers,
  type Answer,
  type ConnectionReceipt,
} from './journal.ts';
import { normalisedId } from './message-ids.ts';
import { registerSmppMetrics, type SmppMetrics } from './metrics.ts';
import { LocalSendRate, type SendRate } from '../../../ratelimit/send-rate.ts';
import { carriedMessage, isReceipt, readReceipt, type DeliveryReceipt } from './receipt-pdu.ts';
import { PART_STATUS } from '../../receipts.ts';
import { ReceiptWatch } from './receipt-watch.ts';
import { ResendBound, type BoundShare } from './resend-bound.ts';
import type { SmppSettings } from './url.ts';
import { SharedSendRate } from '../../../ratelimit/shared-send-rate.ts';
import { ESME_ROK, ESME_RX_T_APPN, refusalOf, statusCode } from './statuses.ts';
import { submitFields } from './submit-fields.ts';

export interface SmppTransportOptions {
  /** The connection's name (sms/routing/): recorded with each part it takes. Default `default`. */
  name?: string;
  database: Database;
  clock: Clock;
  metrics: Registry;
  /** Where messages from handsets go (sms/inbound.ts's receiveInboundSms). */
  receiveInbound: ReceiveInboundSms;
  log?: Log;
  timing?: Partial<BindTiming>;
  random?: () => number;
  monotonic?: () => number;
  /** REDIS_URL: the processes sending on one SMSC account share its tps (ratelimit/shared-send-rate.ts). */
  redisUrl?: string;
  /** Where in Redis the shared rates live; default `herald:smpp-rate:`. */
  rateKeyPrefix?: string;
  /** The process's journal writers, shared by its SMPP connections (SmppJournal); unset, one of its own. */
  journal?: SmppJournal;
}

/**
 * Answers and receipts written together at most. They wait for no others (group-writer.ts): a
 * 5 ms gathering wait held every window slot 5 ms longer, and a 20,000-message batch went at
 * 7,000 a second on SQLite instead of 12,000.
 */
const GROUP_MAX = 1000;

/**
 * What the SMPP transports of a process write, answers and receipts, each a group a transaction
 * across every connection: with a writer each, two connections took turns on the database and
 * carried a campaign at 0.72–0.80 of one connection with the same binds × window. And the bound
 * on what a crash of the process sends again, across its connections (resend-bound.ts).
 */
export class SmppJournal {
  readonly answers: GroupWriter<Answer>;
  readonly bound = new ResendBound();
  readonly receipts: GroupWriter<ConnectionReceipt>;
  private readonly watches = new Map<string, ReceiptWatch>();

  /**
   * `erasureKey`: the key of erased identifiers (messaging/erased-identifiers.ts), so that a receipt
   * for an erased person's part is kept under their number's hash (journal.ts); without it, as a
   * test's journal, such a receipt waits under the number for the retention sweep.
   */
  constructor(database: Database, clock: Clock, log: Log = silentLog, erasureKey?: () => Promise<Buffer>) {
    this.answers = new GroupWriter((answers) => database.call(recordSmppAnswers, { now: clock.now(), answers }), {
      maxItems: GROUP_MAX,
    });
    this.receipts = new GroupWriter(
      async (receipts) => {
        const key = await erasureKey?.();
        const unmatched = await inBackground(() =>
          database.call(applySmppReceipts, { now: clock.now(), receipts, erasureKey: key }),
        );
        const received = new Map<string, number>();
        for (const { smsc } of receipts) received.set(smsc, (received.get(smsc) ?? 0) + 1);
        for (const [smsc, count] of received) this.watches.get(smsc)?.applied(count, unmatched[smsc] ?? 0);
        const waiting = Object.values(unmatched).reduce((sum, n) => sum + n, 0);
        // A receipt may come before its submit's answer is recorded: ordinary unless it lasts (ReceiptWatch).
        if (waiting > 0) log.info({ receipts: waiting }, 'SMPP receipts that match no submit yet: kept for one');
      },
      { maxItems: GROUP_MAX },
    );
  }

  /** Where a connection's receipts that match nothing are watched. */
  watch(smsc: string, watch: ReceiptWatch): void {
    this.watches.set(smsc, watch);
  }
}
/** A part throttled this many times in a row is refused for now: the queue tries its message later. */
const MOST_THROTTLES = 200;
/** With no bind up this long, parts waiting for one are refused for now rather than held (SubmitOptions). */
const NO_BIND_PATIENCE_MS = 30_000;
/** A receipt waits at most this long for its recipient's unrecorded answers before it is matched without them. */
const RECEIPT_HOLD_MS = 2_000;

/** One message of a submit call: its parts' ids as they are answered, and how it ended. */
interface Tracker {
  message: OutgoingSms;
  ids: Array<string | null>;
  /** The connection that took each part: this one, or another that answered it in an earlier try. */
  smsc: string[];
  /** When the earliest part an earlier try submitted was answered; undefined for none. */
  submittedAt: number | undefined;
  unsettled: number;
  failure: Extract<SubmitResult, { accepted: false }> | undefined;
  /** The answers of its parts taken, until each is recorded (smpp_submits). */
  recording: Array<Promise<void>>;
  settle: (result: SubmitResult) => void;
}

/** One part waiting for, or holding, a window slot. */
interface PartJob {
  tracker: Tracker;
  part: number;
  urgent: boolean;
  /** How long it waits while no bind is up. */
  patienceMs: number;
  fields: Record<string, unknown>;
  throttles: number;
  signal: AbortSignal;
}

interface HeldReceipt {
  receipt: DeliveryReceipt;
  respond: (status: number) => void;
  heldAt: number;
}

/** What a deliver_sm from a handset carries besides a receipt's fields. */
type HandsetPdu = Parameters<typeof readReceipt>[0] & {
  destination_addr?: string;
  data_coding?: number;
};

/**
 * SMS over SMPP 3.4 to an operator's SMSC (`SMS_TRANSPORT=smpp://…`): parts go out over
 * `binds` transceiver binds, each with at most `window` submit_sm outstanding, at most `tps` a
 * second across them (and across the processes sending on the account, with REDIS_URL), a
 * share of both held for one-time passcodes. A part counts from its submit until its answer is
 * recorded (smpp_submits, a group of answers a transaction), at most the sum of binds × window
 * of the process's connections (ResendBound), so a crash can send again at most that many parts
 * whose answers were lost; a part whose answer was recorded is never sent again, not after a
 * crash, nor when its message is tried again because another of its parts was refused for now.
 * Receipts are matched and applied a group a transaction, and each deliver_sm is answered once
 * its receipt is kept.
 */
export function smppTransport(settings: SmppSettings, options: SmppTransportOptions): SmsTransport {
  return new SmppTransport(settings, options);
}

/**
 * The process's own rate, or one shared with the other processes sending on the account when Redis
 * is there to share it.
 */
type RateOptions = Pick<SmppTransportOptions, 'redisUrl' | 'rateKeyPrefix'> & {
  monotonic: () => number;
  log: Log;
  ready: () => void;
};

function submitRate(settings: SmppSettings, options: RateOptions): SendRate {
  const { tps, urgentShare } = settings;
  const { redisUrl, monotonic, log, ready } = options;
  if (tps === 0 || !redisUrl) return new LocalSendRate({ tps, urgentShare, monotonic, ready });
  const account = `${settings.host}:${settings.port}:${settings.systemId}`;
  return new SharedSendRate({
    tps,
    urgentShare,
    monotonic,
    ready,
    log,
    redisUrl,
    account,
    keyPrefix: options.rateKeyPrefix ?? 'herald:smpp-rate:',
    name: 'the SMPP submit rate',
  });
}

class SmppTransport implements SmsTransport, BoundShare {
  private readonly name: string;
  private readonly settings: SmppSettings;
  private readonly database: Database;
  private readonly clock: Clock;
  private readonly receiveInbound: ReceiveInboundSms;
  private readonly log: Log;
  private readonly monotonic: () => number;
  private readonly binds: SmppBind[];
  private readonly rate: SendRate;
  private readonly metrics: SmppMetrics;
  /** Slots of each bind's window a campaign may take; passcodes may take them all. */
  private readonly normalLimit: number;
  private readonly queues = { urgent: [] as PartJob[], normal: [] as PartJob[] };
  /** Parts sent and not yet recorded, per recipient: a receipt for the recipient may be for one of them. */
  private readonly busy = new Map<string, number>();
  /** Parts sent and not yet recorded (BoundShare). */
  unrecorded = 0;
  private readonly held = new Map<string, HeldReceipt[]>();
  private readonly journal: SmppJournal;
  private readonly timer: NodeJS.Timeout;
  private boundSince: number;
  private closing = false;
  /** Whether the SMSC was seen to accept a submit with no message_id (logged once). */
  private idlessSeen = false;

  constructor(settings: SmppSettings, options: SmppTransportOptions) {
    this.name = options.name ?? DEFAULT_SMSC;
    this.settings = settings;
    this.database = options.database;
    this.clock = options.clock;
    this.receiveInbound = options.receiveInbound;
    this.log = options.log ?? silentLog;
    this.monotonic = options.monotonic ?? (() => performance.now());
    this.boundSince = this.monotonic();
    this.rate = submitRate(settings, {
      ...options,
      monotonic: this.monotonic,
      log: this.log,
      ready: () => this.pump(),
    });
    this.normalLimit =
      settings.window - Math.min(settings.window - 1, Math.floor(settings.window * settings.urgentShare));
    const timing = { ...DEFAULT_TIMING, ...options.timing };
    this.binds = Array.from(
      { length: settings.binds },
      (_, i) =>
        new SmppBind({
          name: `${settings.systemId}@${settings.host}:${settings.port}#${i + 1}`,
          host: settings.host,
          port: settings.port,
          tls: settings.tls,
          ca: settings.ca,
          systemId: settings.systemId,
          password: settings.password,
          timing,
          random: options.random ?? Math.random,
          monotonic: this.monotonic,
          log: this.log,
          ready: () => this.pump(),
          delivered: (pdu, respond) => this.delivered(pdu, respond),
        }),
    );
    this.metrics = registerSmppMetrics(options.metrics, this.name, {
      windowInUse: () => this.binds.reduce((sum, bind) => sum + bind.inUse, 0),
      windowSize: () => settings.binds * settings.window,
      binds: () => this.binds.map((bind) => bind.state),
    });
    this.journal = options.journal ?? new SmppJournal(this.database, this.clock, this.log);
    const watched = `${settings.systemId}@${settings.host}:${settings.port}`;
    this.journal.watch(this.name, new ReceiptWatch(watched, this.log, this.monotonic));
    this.journal.bound.join(this);
    this.timer = setInterval(() => this.tick(), 500);
    for (const bind of this.binds) bind.open();
  }

  async submit(messages: OutgoingSms[], signal: AbortSignal, options: SubmitOptions = {}): Promise<SubmitResult[]> {
    const urgent = options.urgent === true;
    const patienceMs = options.noBindPatienceMs ?? NO_BIND_PATIENCE_MS;
    const earlier = await answeredBefore(this.database.reads, this.database.dialect, messages);
    const answered = new Map<string, typeof earlier>();
    for (const answer of earlier) {
      const key = `${answer.sendId}\n${answer.recipient}`;
      answered.set(key, [...(answered.get(key) ?? []), answer]);
    }
    const results = messages.map(
      (message) =>
        new Promise<SubmitResult>((settle) => {
          const { parts, encoding } = message.segmented;
          const smsc = parts.map(() => this.name);
          const tracker: Tracker = {
            message,
            ids: parts.map(() => null),
            smsc,
            submittedAt: undefined,
            unsettled: 0,
            failure: undefined,
            recording: [],
            settle,
          };
          // An earlier try's answers count only for the same segmentation of the message.
          for (const answer of answered.get(`${message.sendId}\n${message.recipient}`) ?? []) {
            const sameSegmentation = answer.parts === parts.length && answer.part <= answer.parts;
            if (sameSegmentation) {
              tracker.ids[answer.part - 1] = answer.operatorMessageId;
              tracker.smsc[answer.part - 1] = answer.smsc;
              tracker.submittedAt = Math.min(tracker.submittedAt ?? answer.at, answer.at);
            }
          }
          const missing = parts.flatMap((part, i) => (tracker.ids[i] === null ? [{ part, i }] : []));
          tracker.unsettled = missing.length;
          if (missing.length === 0) this.finish(tracker);
          for (const { part, i } of missing)
            this.enqueue(
              {
                tracker,
                part: i,
                urgent,
                patienceMs,
                fields: submitFields(message, encoding, part),
                throttles: 0,
                signal,
              },
              'back',
            );
        }),
    );
    const dropQueued = () => this.dropWhere((job) => job.signal === signal, 'the worker is stopping');
    signal.addEventListener('abort', dropQueued, { once: true });
    this.pump();
    try {
      return await Promise.all(results);
    } finally {
      signal.removeEventListener('abort', dropQueued);
    }
  }

  bindsUp(): number {
    return this.binds.filter((bind) => bind.state === 'bound').length;
  }

  skipsAnswered(): boolean {
    return true;
  }

  slots(urgent: boolean): number {
    return this.settings.binds * this.windowFor(urgent);
  }

  wantsSlots(): boolean {
    return (
      (this.queues.urgent.length > 0 && this.freeBind(true) !== undefined) ||
      (this.queues.normal.length > 0 && this.freeBind(false) !== undefined)
    );
  }

  /** The slots of each bind's window a part may take: a passcode's all, a campaign's their share. */
  private windowFor(urgent: boolean): number {
    return urgent ? this.settings.window : this.normalLimit;
  }

  /** The bind with the fewest submits unanswered that can take a part (a passcode's if `urgent`) now. */
  private freeBind(urgent: boolean): SmppBind | undefined {
    const limit = this.windowFor(urgent);
    let bind: SmppBind | undefined;
    for (const candidate of this.binds)
      if (candidate.canSubmit && candidate.inUse < limit && (!bind || candidate.inUse < bind.inUse)) bind = candidate;
    return bind;
  }

  async close(): Promise<void> {
    this.closing = true;
    clearInterval(this.timer);
    this.metrics.release();
    this.journal.bound.leave(this);
    this.dropWhere(() => true, 'the SMPP transport is closing');
    await Promise.all([...this.binds.map((bind) => bind.close()), this.rate.close()]);
    await Promise.all([this.journal.answers.drained(), this.journal.receipts.drained()]);
  }

  private enqueue(job: PartJob, end: 'front' | 'back'): void {
    if (this.closing || job.signal.aborted) {
      this.partRefused(job, false, 'not sent: the worker is stopping', null);
      return;
    }
    const queue = job.urgent ? this.queues.urgent : this.queues.normal;
    if (end === 'front') queue.unshift(job);
    else queue.push(job);
  }

  /** Hands waiting parts to binds while a bind has a slot for them and the bound and the rate allow. */
  pump(): void {
    for (;;) {
      const urgent = this.queues.urgent.length > 0;
      const queue = urgent ? this.queues.urgent : this.queues.normal;
      const job = queue[0];
      if (!job) return;
      if (job.tracker.failure) {
        // Its message is refused already: its other parts are not sent.
        queue.shift();
        this.partSettled(job.tracker);
        continue;
      }
      const bind = this.freeBind(urgent);
      if (!bind || !this.journal.bound.allows(this, urgent)) return;
      // No token: the rate pumps again when there may be one.
      if (!this.rate.take(urgent, queue.length)) return;
      queue.shift();
      this.send(bind, job);
    }
  }

  private send(bind: SmppBind, job: PartJob): void {
    const recipient = job.tracker.message.recipient;
    bind.inUse += 1;
    this.unrecorded += 1;
    this.busy.set(recipient, (this.busy.get(recipient) ?? 0) + 1);
    const sent = bind.submit({
      fields: job.fields,
      answered: (status, messageId) => this.answered(bind, job, status, messageId),
      lost: () => {
        this.metrics.resubmits.inc({ reason: 'unanswered' });
        // Queued again before the slot frees: freeing it pumps, and the part must be there to go.
        this.enqueue(job, 'front');
        this.freeSlot(bind, recipient);
      },
    });
    if (!sent) {
      this.enqueue(job, 'front');
      this.freeSlot(bind, recipient);
      return;
    }
    this.metrics.submits.inc({ priority: job.urgent ? 'urgent' : 'normal' });
  }

  private answered(bind: SmppBind, job: PartJob, status: number, messageId: string): void {
    const { tracker, part } = job;
    const { message } = tracker;
    this.metrics.responses.inc({ status: statusCode(status) });
    if (status === ESME_ROK) {
      bind.accepted();
      const id = normalisedId(messageId);
      if (id === '' && !this.idlessSeen) {
        this.idlessSeen = true;
        this.log.warn(
          { smsc: this.name },
          'the SMSC accepted a submit with no message_id: no receipt can be matched to it, so such messages ' +
            'stay Submitted until they expire; ask the operator to send ids',
        );
      }
      tracker.ids[part] = id;
      this.partSettled(tracker);
      const { sendId, recipient } = message;
      const parts = message.segmented.parts.length;
      const answer = { sendId, recipient, part: part + 1, parts, operatorMessageId: id, smsc: this.name };
      // The bind's slot is free; the part counts toward the resend bound until its answer is recorded.
      bind.inUse -= 1;
      // recordAnswer retries until the answer is kept and never rejects.
      tracker.recording.push(this.recordAnswer(answer).then(() => this.recorded(recipient)));
      this.pump();
      return;
    }
    this.freeSlot(bind, message.recipient);
    const refusal = refusalOf(status);
    if (refusal === 'slow down') {
      bind.slowDown();
      job.throttles += 1;
      if (job.throttles < MOST_THROTTLES) {
        this.metrics.resubmits.inc({ reason: 'throttled' });
        this.enqueue(job, 'front');
        return;
      }
    }
    this.partRefused(
      job,
      refusal === 'for good',
      `the SMSC refused the message (command_status ${statusCode(status)})`,
      statusCode(status),
    );
  }

  /** Records an answer, trying again while the database cannot take it: its slot stays held meanwhile. */
  private async recordAnswer(answer: Answer): Promise<void> {
    for (;;) {
      try {
        await this.journal.answers.add(answer);
        return;
      } catch (error) {
        this.log.error({ error: (error as Error).message }, 'recording SMPP answers failed: trying again in a second');
        await new Promise((resolve) => setTimeout(resolve, 1000));
      }
    }
  }

  private partRefused(job: PartJob, permanent: boolean, error: string, errorCode: string | null): void {
    const { tracker } = job;
    if (!tracker.failure || (permanent && !tracker.failure.permanent))
      tracker.failure = { accepted: false, permanent, error, errorCode };
    this.partSettled(tracker);
  }

  private partSettled(tracker: Tracker): void {
    tracker.unsettled -= 1;
    if (tracker.unsettled === 0) this.finish(tracker);
  }

  private finish(tracker: Tracker): void {
    const { ids, smsc, submittedAt, failure } = tracker;
    if (failure) {
      // A refusal for now may send the message over the next connection at once (routed.ts),
      // which sends only the parts no answer recorded (answeredBefore): the parts this one took
      // are recorded first, or they would go twice. The parts taken, here or in an earlier try,
      // go with the refusal: should it end the message, they are billed (docs/sms.md).
      const taken = ids.flatMap((id, i) =>
        id === null ? [] : [{ part: i + 1, operatorMessageId: id, smsc: smsc[i] }],
      );
      const result = taken.length > 0 ? { ...failure, taken } : failure;
      void Promise.all(tracker.recording).then(() => tracker.settle(result));
      return;
    }
    tracker.settle({ accepted: true, operatorMessageIds: ids as string[], smsc, submittedAt });
  }

  /** A part's submit was not answered, or answered with a refusal: its slot and its count toward the bound free. */
  private freeSlot(bind: SmppBind, recipient: string): void {
    bind.inUse -= 1;
    this.recorded(recipient);
  }

  /** A part no longer counts toward the resend bound: its answer is recorded, or it is not sent. */
  private recorded(recipient: string): void {
    this.unrecorded -= 1;
    const left = (this.busy.get(recipient) ?? 1) - 1;
    if (left > 0) {
      this.busy.set(recipient, left);
    } else {
      this.busy.delete(recipient);
      const held = this.held.get(recipient);
      this.held.delete(recipient);
      for (const { receipt, respond } of held ?? []) this.keepReceipt(receipt, respond);
    }
    this.pump();
    this.journal.bound.released(this);
  }

  private dropWhere(match: (job: PartJob) => boolean, reason: string): void {
    for (const name of ['urgent', 'normal'] as const) {
      const dropped = this.queues[name].filter(match);
      if (dropped.length === 0) continue;
      this.queues[name] = this.queues[name].filter((job) => !match(job));
      for (const job of dropped) this.partRefused(job, false, `not sent: ${reason}`, null);
    }
  }

  private delivered(pdu: Parameters<typeof readReceipt>[0], respond: (status: number) => void): void {
    if (!isReceipt(pdu)) {
      this.fromHandset(pdu as HandsetPdu, respond);
      return;
    }
    const receipt = readReceipt(pdu);
    if (!receipt) {
      this.log.warn({}, 'an SMPP receipt names no message id or state: answered and not kept');
      respond(ESME_ROK);
      return;
    }
    // The SMSC writes the state: one SMPP does not name is counted as `other`, not as a label of its own.
    this.metrics.receipts.inc({ state: Object.hasOwn(PART_STATUS, receipt.state) ? receipt.state : 'other' });
    // A receipt can come before the answer to its submit is recorded (or even received): it
    // waits while its recipient has a slot held, so it finds the part it reports on.
    if (this.busy.has(receipt.recipient)) {
      const held = this.held.get(receipt.recipient) ?? [];
      held.push({ receipt, respond, heldAt: this.monotonic() });
      this.held.set(receipt.recipient, held);
      return;
    }
    this.keepReceipt(receipt, respond);
  }

  /**
   * A message from a handset (given to receiveInbound), answered once it is kept. One that routes to no
   * account is answered too, and dropped: offered again, it would route nowhere again.
   */
  private fromHandset(pdu: HandsetPdu, respond: (status: number) => void): void {
    // The smpp package decodes data_coding 0 (GSM 03.38) and 8 (UCS-2); what it leaves as bytes is read as Latin-1.
    const message = carriedMessage(pdu);
    const text =
      typeof message === 'string'
        ? message
        : message
          ? pdu.data_coding === 8
            ? new TextDecoder('utf-16be').decode(message)
            : message.toString('latin1')
          : '';
    // A NUL (UCS-2 or Latin-1 can carry one) cannot be kept in PostgreSQL's text: it reads as U+FFFD.
    const kept = text.replaceAll('\u0000', '\ufffd');
    const mo = { from: pdu.source_addr ?? '', to: pdu.destination_addr ?? '', text: kept, at: this.clock.now() };
    this.receiveInbound(mo).then(
      (outcome) => {
        if (!outcome) this.log.warn({}, 'an SMPP message from a handset routes to no account: answered and dropped');
        respond(ESME_ROK);
      },
      (error: unknown) => {
        this.log.error(
          { error: (error as Error).message },
          'keeping an SMPP message from a handset failed: the SMSC offers it again',
        );
        respond(ESME_RX_T_APPN);
      },
    );
  }

  private keepReceipt(receipt: DeliveryReceipt, respond: (status: number) => void): void {
    this.journal.receipts.add({ ...receipt, smsc: this.name }).then(
      () => respond(ESME_ROK),
      (error: unknown) => {
        this.log.error({ error: (error as Error).message }, 'keeping SMPP receipts failed: the SMSC offers them again');
        respond(ESME_RX_T_APPN);
      },
    );
  }

  /** Twice a second: receipts held too long, and parts waiting for a bind that has been down too long. */
  private tick(): void {
    const now = this.monotonic();
    for (const [recipient, held] of this.held) {
      const due = held.filter((h) => now - h.heldAt >= RECEIPT_HOLD_MS);
      if (due.length === 0) continue;
      const rest = held.filter((h) => now - h.heldAt < RECEIPT_HOLD_MS);
      if (rest.length > 0) this.held.set(recipient, rest);
      else this.held.delete(recipient);
      for (const { receipt, respond } of due) this.keepReceipt(receipt, respond);
    }
    if (this.binds.some((bind) => bind.state === 'bound')) {
      this.boundSince = now;
    } else {
      const down = now - this.boundSince;
      this.dropWhere(
        (job) => down >= job.patienceMs,
        `no SMPP bind to ${this.settings.host}:${this.settings.port} for ${Math.floor(down / 1000)} s`,
      );
    }
    // Parts are handed out when a slot frees, a bind comes back or its pause ends; should one of
    // those wake-ups be missed, waiting parts go at the next tick rather than never (a batch
    // sat with 114 parts queued and both binds idle).
    this.pump();
  }
}
