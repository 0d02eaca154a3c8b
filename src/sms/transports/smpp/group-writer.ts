/**
 * Writes items a group at a time, as a database's group commit does: the first item waits at
 * most `delayMs` for others, a group is at most `maxItems`, and while one group is being
 * written the next gathers. Each add resolves once its group has committed (or rejects with
 * the group's error). At thousands of answers or receipts a second this is one transaction
 * every few milliseconds instead of one each.
 */
export class GroupWriter<T> {
  private gathering: Array<{ item: T; settle: (error?: unknown) => void }> = [];
  private writing = false;
  private timer: NodeJS.Timeout | undefined;
  private readonly write: (items: T[]) => Promise<void>;
  private readonly delayMs: number;
  private readonly maxItems: number;

  constructor(write: (items: T[]) => Promise<void>, options: { delayMs: number; maxItems: number }) {
    this.write = write;
    this.delayMs = options.delayMs;
    this.maxItems = options.maxItems;
  }

  add(item: T): Promise<void> {
    return new Promise((resolve, reject) => {
      this.gathering.push({ item, settle: (error) => (error === undefined ? resolve() : reject(error)) });
      if (this.writing) return;
      if (this.gathering.length >= this.maxItems) this.flush();
      else this.timer ??= setTimeout(() => this.flush(), this.delayMs);
    });
  }

  /** Resolves once everything added so far is written. */
  async drained(): Promise<void> {
    while (this.writing || this.gathering.length > 0) {
      if (!this.writing) this.flush();
      await new Promise((resolve) => setTimeout(resolve, this.delayMs));
    }
  }

  private flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.writing || this.gathering.length === 0) return;
    const group = this.gathering.splice(0, this.maxItems);
    this.writing = true;
    this.write(group.map((entry) => entry.item)).then(
      () => this.done(group, undefined),
      (error: unknown) => this.done(group, error ?? new Error('the write failed')),
    );
  }

  private done(group: Array<{ settle: (error?: unknown) => void }>, error: unknown): void {
    this.writing = false;
    for (const entry of group) entry.settle(error);
    if (this.gathering.length > 0) this.flush();
  }
}
