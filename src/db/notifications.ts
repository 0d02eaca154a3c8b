/**
 * PostgreSQL NOTIFYs sent after a procedure's commit rather than inside its transaction.
 *
 * A transaction that notifies takes one database-wide lock at commit and holds it until its
 * commit is flushed, so every such commit waits for the one before it: with a NOTIFY in each
 * one-time passcode's accept, 500 accepts a second queued behind one another's WAL flushes
 * (most of what PostgreSQL's backends did was wait on that lock). Here a procedure's
 * NOTIFYs (and whatever else must wait for its commit) are kept until it has returned, then
 * sent by one connection of the process, all that gathered meanwhile in one statement.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type pg from 'pg';

interface UnitOfWork {
  effects: Array<() => void>;
  notifier: Notifier;
}

const units = new AsyncLocalStorage<UnitOfWork>();

/**
 * Runs `effect` once the procedure this code runs in has returned, its writes committed;
 * answers false, running nothing, outside a procedure of a PostgreSQL database (the caller
 * acts at once). A procedure that throws drops its effects: its writes were rolled back.
 */
export function afterCommit(effect: () => void): boolean {
  const unit = units.getStore();
  if (!unit) return false;
  unit.effects.push(effect);
  return true;
}

/**
 * NOTIFY `channel` with `payload` once the procedure this code runs in has committed; false outside
 * one (afterCommit).
 */
export function notifyAfterCommit(channel: string, payload: string): boolean {
  const unit = units.getStore();
  if (!unit) return false;
  const { notifier } = unit;
  unit.effects.push(() => notifier.notify(channel, payload));
  return true;
}

/**
 * Between two of a notifier's statements. Each NOTIFY is a commit of its own, and wakes every
 * listener of the database, this process's too: at 500 passcodes a second, one statement per
 * accept cost more than the accepts' own. Other processes' workers hear of new jobs up to
 * this much later; this process's own are woken at once, in-process.
 */
const NOTIFY_INTERVAL_MS = 5;

/**
 * The NOTIFYs of one process: a connection of their own, one statement at a time and at most
 * one every NOTIFY_INTERVAL_MS, the notifications that arrive meanwhile sent together by the
 * next (duplicates once).
 */
export class Notifier {
  private client: pg.Client | undefined;
  private pending = new Map<string, Set<string>>();
  private sending: Promise<void> | undefined;
  private closed = false;
  private readonly connect: () => Promise<pg.Client>;
  private readonly onError: (error: unknown) => void;

  constructor(connect: () => Promise<pg.Client>, onError: (error: unknown) => void = () => {}) {
    this.connect = connect;
    this.onError = onError;
  }

  /** The backend of this notifier's connection: a listener of the same process skips what it sent. */
  get processId(): number | undefined {
    return (this.client as (pg.Client & { processID?: number }) | undefined)?.processID;
  }

  /** Runs `work` as a unit of work: its afterCommit effects run once it has returned. */
  async unitOfWork<T>(work: () => Promise<T>): Promise<T> {
    if (units.getStore()) return work();
    const unit: UnitOfWork = { effects: [], notifier: this };
    const result = await units.run(unit, work);
    for (const effect of unit.effects) effect();
    return result;
  }

  notify(channel: string, payload: string): void {
    if (this.closed) return;
    let payloads = this.pending.get(channel);
    if (!payloads) {
      payloads = new Set();
      this.pending.set(channel, payloads);
    }
    payloads.add(payload);
    this.sending ??= this.send();
  }

  private async send(): Promise<void> {
    while (this.pending.size > 0 && !this.closed) {
      const batch = [...this.pending].flatMap(([channel, payloads]) =>
        [...payloads].map((payload) => ({ channel, payload })),
      );
      this.pending = new Map();
      try {
        this.client ??= await this.open();
        const notifyEach = "select pg_notify(n ->> 'channel', n ->> 'payload') from jsonb_array_elements($1::jsonb) n";
        await this.client.query(notifyEach, [JSON.stringify(batch)]);
        await new Promise((resolve) => setTimeout(resolve, NOTIFY_INTERVAL_MS));
      } catch (error) {
        // Listeners then find the work at their next poll.
        this.onError(error);
        const broken = this.client;
        this.client = undefined;
        await broken?.end().catch(() => {});
      }
    }
    this.sending = undefined;
  }

  private async open(): Promise<pg.Client> {
    const client = await this.connect();
    client.on('error', (error) => this.onError(error));
    client.on('end', () => {
      if (this.client === client) this.client = undefined;
    });
    return client;
  }

  async close(): Promise<void> {
    await this.sending;
    this.closed = true;
    await this.client?.end();
    this.client = undefined;
  }
}
