import type { Log } from '../../../log.ts';

/**
 * How long receipts may match no message, with none matching meanwhile, before the operator is
 * told. A receipt that comes before its submit's answer is recorded matches within seconds.
 */
export const UNMATCHED_TELL_MS = 10 * 60_000;

/**
 * Whether an SMSC's receipts find their messages. A receipt now and then that matches nothing
 * is ordinary (its submit's answer was lost in a crash and the part sent again); receipts that
 * match nothing for UNMATCHED_TELL_MS while none matches are not: the SMSC writes message ids in
 * its receipts otherwise than in its answers, or sends another account's, and every message
 * stays Submitted until SMS_RECEIPT_TIMEOUT_HOURS fails it. Told once a spell, and its end.
 */
export class ReceiptWatch {
  private readonly smsc: string;
  private readonly log: Log;
  private readonly monotonic: () => number;
  /** Since when (monotonic ms) no receipt matched, while some came. */
  private since: number | undefined;
  private unmatched = 0;
  private told = false;

  constructor(smsc: string, log: Log, monotonic: () => number) {
    this.smsc = smsc;
    this.log = log;
    this.monotonic = monotonic;
  }

  /** A group of `total` receipts was applied, `unmatched` of them matching no message yet. */
  applied(total: number, unmatched: number): void {
    if (unmatched < total) {
      if (this.told) this.log.warn({ smsc: this.smsc, unmatched: this.unmatched }, 'SMPP receipts match again');
      this.since = undefined;
      this.unmatched = 0;
      this.told = false;
      return;
    }
    const now = this.monotonic();
    this.since ??= now;
    this.unmatched += unmatched;
    if (this.told || now - this.since < UNMATCHED_TELL_MS) return;
    this.told = true;
    const minutes = Math.round((now - this.since) / 60_000);
    this.log.error(
      { smsc: this.smsc, unmatched: this.unmatched, minutes },
      `SMPP receipts have matched no message for ${minutes} minutes: its messages stay Submitted. ` +
        'Does the SMSC write the message ids of its receipts as those of its submit_sm_resp, and for this system id?',
    );
  }
}
