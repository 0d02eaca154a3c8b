/**
 * Group commit: callers that arrive while a group is being written wait and go together as
 * the next group, in one transaction (on PostgreSQL one statement) instead of one each. A
 * caller alone goes at once (with `waitForTurn`, at the end of the event loop's turn), so an idle
 * service pays no wait; under load a group is what arrived during the last one's round trip, so
 * the wait is at most one group's write.
 *
 * A group that fails is written again one caller at a time, so one caller's refusal (a
 * constraint its row breaks) fails that caller alone and the others commit.
 *
 * Reads go the same way where each request makes one of its own (a passcode's address check,
 * messaging/recipients.ts): the group's work is then one statement for all of them.
 */
interface Caller<A, R> {
  args: A;
  resolve: (result: R) => void;
  reject: (error: unknown) => void;
}

export class Gathering<A, R> {
  private waiting: Array<Caller<A, R>> = [];
  private writing = false;
  private readonly write: (group: A[]) => Promise<R[]>;
  private readonly maxSize: number;
  private readonly onGroup: (size: number) => void;
  private readonly waitForTurn: boolean;

  /**
   * `write`: the writes of a group, atomic, answering each caller's result in order.
   * `maxSize`: callers per group; more wait for the next. `onGroup`: told each group's size.
   * `waitForTurn`: a caller alone waits for the event loop's turn before its group goes, for
   * reads that run to their end at once (SYNCHRONOUS_READS): without it, no other caller could
   * ever join one.
   */
  constructor(
    write: (group: A[]) => Promise<R[]>,
    options: { maxSize: number; onGroup?: (size: number) => void; waitForTurn?: boolean },
  ) {
    this.write = write;
    this.maxSize = options.maxSize;
    this.onGroup = options.onGroup ?? (() => {});
    this.waitForTurn = options.waitForTurn ?? false;
  }

  /** Resolves once the caller's group has committed, with its own result. */
  run(args: A): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.waiting.push({ args, resolve, reject });
      if (this.writing) return;
      if (!this.waitForTurn) void this.next();
      else if (this.waiting.length === 1) setImmediate(() => void this.next());
    });
  }

  private async next(): Promise<void> {
    this.writing = true;
    while (this.waiting.length > 0) {
      const group = this.waiting.splice(0, this.maxSize);
      this.onGroup(group.length);
      try {
        const results = await this.write(group.map((caller) => caller.args));
        for (const [i, caller] of group.entries()) caller.resolve(results[i]);
      } catch (error) {
        if (group.length === 1) group[0].reject(error);
        else await Promise.all(group.map((caller) => this.alone(caller)));
      }
    }
    this.writing = false;
  }

  private async alone(caller: Caller<A, R>): Promise<void> {
    try {
      caller.resolve((await this.write([caller.args]))[0]);
    } catch (error) {
      caller.reject(error);
    }
  }
}

/**
 * Callers of one procedure of groups per group at most: a group of `/sms/batch` requests
 * holds their recipients too. Gathered reads take the same bound (messaging/recipients.ts).
 */
export const GROUP_SIZE = 64;
