/**
 * The process's submit rate (SMS_TRANSPORT's `tps`), shared by its binds: two token buckets,
 * one for every send at (1 − urgentShare) × tps and one that only one-time passcodes draw on at
 * urgentShare × tps, so a campaign never takes the rate passcodes are promised. A passcode
 * takes from its own bucket first, then from the other. Each bucket holds a tenth of a
 * second of its rate, so a pause is not made up in a burst the SMSC would throttle.
 */
interface Bucket {
  rate: number;
  capacity: number;
  tokens: number;
}

export class SubmitRate {
  private readonly buckets: { normal: Bucket; urgent: Bucket } | undefined;
  private refilledAt: number;
  private readonly monotonic: () => number;

  /** `tps` 0: no cap of Herald's own. */
  constructor(tps: number, urgentShare: number, monotonic: () => number) {
    this.monotonic = monotonic;
    this.refilledAt = monotonic();
    if (tps === 0) return;
    const bucket = (rate: number): Bucket => ({ rate, capacity: Math.max(1, rate / 10), tokens: Math.max(1, rate / 10) });
    this.buckets = { normal: bucket(tps * (1 - urgentShare)), urgent: bucket(tps * urgentShare) };
  }

  /** Takes a submit's token; false when there is none for it now (see waitMs). */
  take(urgent: boolean): boolean {
    if (!this.buckets) return true;
    this.refill();
    const { normal, urgent: reserved } = this.buckets;
    for (const bucket of urgent ? [reserved, normal] : [normal]) {
      if (bucket.tokens >= 1) {
        bucket.tokens -= 1;
        return true;
      }
    }
    return false;
  }

  /** How long until a token for such a submit. */
  waitMs(urgent: boolean): number {
    if (!this.buckets) return 0;
    this.refill();
    const { normal, urgent: reserved } = this.buckets;
    const waits = (urgent ? [reserved, normal] : [normal]).filter((b) => b.rate > 0).map((b) => ((1 - b.tokens) * 1000) / b.rate);
    return Math.max(1, Math.ceil(Math.min(...waits)));
  }

  private refill(): void {
    const now = this.monotonic();
    const elapsed = now - this.refilledAt;
    this.refilledAt = now;
    for (const bucket of Object.values(this.buckets!)) bucket.tokens = Math.min(bucket.capacity, bucket.tokens + (elapsed * bucket.rate) / 1000);
  }
}
