/**
 * A transport's rate (SMS_TRANSPORT's `tps` the SMPP binds draw on, EMAIL_TRANSPORT's `rate`
 * the SMTP pool does): a share of it (`urgent`) held for one-time passcodes, so a campaign
 * never takes the rate passcodes are promised. Per process (LocalSendRate), or shared by the
 * processes of a deployment through Redis (SharedSendRate, when REDIS_URL is set); the
 * transport does not know which.
 */
export interface SendRate {
  /**
   * Takes a message's token, for a passcode (`urgent`) or not, `waiting` such messages queued;
   * false when there is none now, and then `ready` (given at creation) is called once there
   * may be one.
   */
  take(urgent: boolean, waiting: number): boolean;
  close(): Promise<void>;
}

export interface SendRateOptions {
  /** Messages (SMPP: submit_sm) a second; 0: no cap. */
  tps: number;
  urgentShare: number;
  /** Monotonic milliseconds (performance.now). */
  monotonic: () => number;
  ready: () => void;
}

/** A bucket holds a tenth of a second of its rate, so a pause is not made up in a burst the next hop would throttle. */
export const BURST_SECONDS = 0.1;

/** The two lanes' rates: every send at (1 − urgentShare) × tps, passcodes only at urgentShare × tps. */
export function laneRates(tps: number, urgentShare: number): { normal: number; urgent: number } {
  return { normal: tps * (1 - urgentShare), urgent: tps * urgentShare };
}

export function bucketCapacity(rate: number): number {
  return rate > 0 ? Math.max(1, rate * BURST_SECONDS) : 0;
}

interface Bucket {
  rate: number;
  capacity: number;
  tokens: number;
}

/**
 * The process's own rate: two token buckets, one for every send and one only passcodes draw
 * on. A passcode takes from its own bucket first, then from the other.
 */
export class LocalSendRate implements SendRate {
  private readonly buckets: { normal: Bucket; urgent: Bucket } | undefined;
  private refilledAt: number;
  private readonly monotonic: () => number;
  private readonly ready: () => void;
  private timer: NodeJS.Timeout | undefined;
  private timerDue = Infinity;

  /** `tps` 0: no cap of Herald's own. */
  constructor(options: SendRateOptions) {
    this.monotonic = options.monotonic;
    this.ready = options.ready;
    this.refilledAt = options.monotonic();
    if (options.tps === 0) return;
    const bucket = (rate: number): Bucket => ({ rate, capacity: bucketCapacity(rate), tokens: bucketCapacity(rate) });
    const rates = laneRates(options.tps, options.urgentShare);
    this.buckets = { normal: bucket(rates.normal), urgent: bucket(rates.urgent) };
  }

  take(urgent: boolean): boolean {
    if (!this.buckets) return true;
    this.refill();
    for (const bucket of this.lanes(urgent)) {
      if (bucket.tokens >= 1) {
        bucket.tokens -= 1;
        return true;
      }
    }
    this.wakeIn(this.waitMs(urgent));
    return false;
  }

  /** How long until a token for such a message. */
  waitMs(urgent: boolean): number {
    if (!this.buckets) return 0;
    this.refill();
    const waits = this.lanes(urgent)
      .filter((b) => b.rate > 0)
      .map((b) => ((1 - b.tokens) * 1000) / b.rate);
    return Math.max(1, Math.ceil(Math.min(...waits)));
  }

  async close(): Promise<void> {
    clearTimeout(this.timer);
  }

  private lanes(urgent: boolean): Bucket[] {
    const { normal, urgent: reserved } = this.buckets!;
    return urgent ? [reserved, normal] : [normal];
  }

  /** One timer, moved earlier when a passcode's token is due before a campaign's. */
  private wakeIn(ms: number): void {
    const due = this.monotonic() + ms;
    if (this.timer && due >= this.timerDue) return;
    clearTimeout(this.timer);
    this.timerDue = due;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.timerDue = Infinity;
      this.ready();
    }, ms);
  }

  private refill(): void {
    const now = this.monotonic();
    const elapsed = now - this.refilledAt;
    this.refilledAt = now;
    for (const bucket of Object.values(this.buckets!))
      bucket.tokens = Math.min(bucket.capacity, bucket.tokens + (elapsed * bucket.rate) / 1000);
  }
}
