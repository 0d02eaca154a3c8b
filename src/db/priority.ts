import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * Work that gives way. A campaign's pages, receipts and a webhook post's bookkeeping wait
 * for a database connection beside the API's requests and the one-time passcodes: SQLite's
 * one connection (sqlite.ts), PostgreSQL's pool (database.ts). A passcode that queued behind
 * a few 15 ms pages missed its 100 ms. Statements and procedures run inside `inBackground`
 * are handed a connection only when nothing else waits for one (or after waiting
 * BACKGROUND_PATIENCE_MS); everything else (requests, passcodes) goes first, in turn.
 */
const background = new AsyncLocalStorage<true>();

export function inBackground<T>(work: () => Promise<T>): Promise<T> {
  return background.run(true, work);
}

export function isBackground(): boolean {
  return background.getStore() === true;
}

/**
 * How long background work waits while urgent work takes the connections before it has a
 * turn anyway, so that a campaign keeps moving under a steady stream of requests. Measured
 * with bench/sms.ts on SQLite (500 passcodes a second beside a 100,000-recipient batch): at
 * 20 to 30 ms the passcodes fell behind the batch's statements; at 100 ms they kept a p99
 * under 55 ms, and the batch went at about 9,400 messages a second (12,500 with no passcodes
 * beside it).
 */
const BACKGROUND_PATIENCE_MS = 100;

/** A number of connections, each held by one caller at a time and handed over urgent callers first. */
export class Turns {
  private readonly capacity: number;
  private readonly now: () => number;
  private held = 0;
  private readonly queues = {
    urgent: [] as Array<() => void>,
    background: [] as Array<{ take: () => void; since: number }>,
  };

  /** `now`: a monotonic time in milliseconds, which only the background patience reads. */
  constructor(capacity: number, now: () => number = () => performance.now()) {
    this.capacity = capacity;
    this.now = now;
  }

  /** How many callers wait for a turn: none while the connections keep up with them. */
  get waiting(): number {
    return this.queues.urgent.length + this.queues.background.length;
  }

  /** Resolves once the caller holds a turn: at once while one is free, else in its order. */
  take(): Promise<void> {
    if (this.held < this.capacity) {
      this.held += 1;
      return Promise.resolve();
    }
    return new Promise<void>((take) =>
      isBackground() ? this.queues.background.push({ take, since: this.now() }) : this.queues.urgent.push(take),
    );
  }

  /** Hands the caller's turn to the next waiter, which then holds it; or frees it. */
  give(): void {
    const { urgent, background } = this.queues;
    const urgentTurn =
      urgent.length > 0 && (background.length === 0 || this.now() - background[0].since < BACKGROUND_PATIENCE_MS);
    const next = urgentTurn ? urgent.shift() : background.shift()?.take;
    if (next) next();
    else this.held -= 1;
  }
}

/**
 * Which of the requests waiting, in the order they came, goes next where they wait for one
 * connection after being posted (SQLite's thread, sqlite-thread.ts): the first urgent one
 * ahead of background ones, but never past a request that keeps its place (`urgent`
 * undefined: a transaction's statement), and the oldest once it has waited its patience.
 */
export function nextInLine(
  waiting: ReadonlyArray<{ urgent: boolean | undefined; since: number }>,
  now: number,
): number {
  if (now - waiting[0].since >= BACKGROUND_PATIENCE_MS) return 0;
  for (let i = 0; i < waiting.length; i++) {
    if (waiting[i].urgent === undefined) break;
    if (waiting[i].urgent) return i;
  }
  return 0;
}
