/**
 * Writes items a group at a time, as a database's group commit does: a group is what was added
 * in the same turn of the event loop (the answers of one socket read) or while the group before
 * was being written, at most `maxItems`. Each add resolves once its group has committed (or
 * rejects with the group's error). At thousands of answers or receipts a second this is a
 * transaction every few milliseconds instead of one each, and at a few a second no wait.
 */
export class GroupWriter<T> {
  private gathering: Array<{ item: T; settle: (error?: unknown) => void }> = [];
  private writing = false;
  private scheduled = false;
  private readonly write: (items: T[]) => Promise<void>;
  private readonly maxItems: number;

  constructor(write: (items: T[]) => Promise<void>, options: { maxItems: number }) {
    this.write = write;
    this.maxItems = options.maxItems;
  }

  add(item: T): Promise<void> {
    return new Promise((resolve, reject) => {
      this.gathering.push({ item, settle: (error) => (error === undefined ? resolve() : reject(error)) });
      if (this.writing || this.scheduled) return;
      this.scheduled = true;
      setImmediate(() => {
        this.scheduled = false;
        this.flush();
      });
    });
  }

  /** Resolves once everything added so far is written. */
  async drained(): Promise<void> {
    while (this.writing || this.scheduled || this.gathering.length > 0) {
      if (!this.writing && !this.scheduled) this.flush();
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
  }

  private flush(): void {
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
    this.flush();
  }
}
