import type { Clock } from '../clock.ts';

/** Posts in flight to one destination host from this process, so one event burst cannot flood a receiver. */
const POSTS_PER_HOST = 4;
/**
 * Deliveries that may wait in a worker slot for a post to their host to end. Waiting costs
 * nothing but the slot, where going back to the queue costs a write, a claim and a read; past
 * this, the slots are better left to other hosts.
 */
const WAITING_PER_HOST = 4;
/**
 * Worker slots one account's deliveries may hold in this process, posting or waiting: a
 * quarter of the kind's 32, so an account whose receivers hang, under one host name or under
 * many, leaves the rest to the other accounts.
 */
export const SLOTS_PER_ACCOUNT = 8;
/** A post's time assumed where none has ended yet. */
const FIRST_POST_MS = 100;
/** How much the latest post counts in a lane's mean post time. */
const LATEST_WEIGHT = 0.2;
/** Lanes kept before those no longer used are looked for. */
const SWEEP_AT_LANES = 1000;
/** The furthest ahead a delivery turned away is set; a longer backlog is spread again when it comes back. */
const MOST_SPREAD_MS = 5 * 60_000;

/** The deliveries of one host, or of one account, that hold worker slots in this process. */
class Lane {
  /** Deliveries holding a worker slot, posting or waiting to. */
  held = 0;
  /** When each post under way began (performance.now()), oldest first. */
  readonly posting: number[] = [];
  /** Deliveries waiting for a post to end, first come first served; each is handed the slot it gives back. */
  readonly waiting: Array<() => void> = [];
  private meanPostMs = FIRST_POST_MS;
  /** When the last delivery turned away from this lane comes back. */
  private spreadUntil = 0;

  ended(startedAt: number): void {
    this.posting.splice(this.posting.indexOf(startedAt), 1);
    const took = performance.now() - startedAt;
    this.meanPostMs += (took - this.meanPostMs) * LATEST_WEIGHT;
  }

  /**
   * When a delivery turned away should come back: after those turned away before it, at the
   * pace `width` posts at a time would clear them. A post still under way counts for as long
   * as it has lasted, so a receiver that hangs is known before its first timeout.
   */
  turnAway(now: number, width: number): number {
    const longestUnderWay = this.posting.length === 0 ? 0 : performance.now() - this.posting[0];
    const postMs = Math.max(this.meanPostMs, longestUnderWay);
    // Bounded as what it answers is: a backlog sent round again past the bound does not push it
    // further each time, to hold every later delivery back long after the host recovered.
    this.spreadUntil = Math.min(Math.max(now, this.spreadUntil) + postMs / width, now + MOST_SPREAD_MS);
    // A whole millisecond: the queue keeps its times as integers.
    return Math.ceil(this.spreadUntil);
  }

  unused(now: number): boolean {
    return this.held === 0 && this.spreadUntil <= now;
  }
}

/** A delivery's place to post from; `give` once the post is over. */
export interface PostSlot {
  give(): void;
}

/**
 * How this process shares its webhook posts among receivers and accounts. A delivery posts
 * at once if its host has a post free, or waits its turn in its worker slot, up to a bound;
 * otherwise, or when its account holds its share of slots, it is turned away with the time to
 * come back, spread so that a backlog returns at the pace its lane clears it rather than all
 * at once, over and over (each return a claim and a read).
 */
export class PostSlots {
  private readonly hosts = new Map<string, Lane>();
  private readonly accounts = new Map<string, Lane>();
  private readonly clock: Clock;
  constructor(clock: Clock) {
    this.clock = clock;
  }

  /**
   * The slot to post from; or when to come back (epoch ms), turned away or after waiting
   * `waitMs` for the host; or 'interrupted' if the signal aborted first.
   */
  async take(
    accountId: string,
    hostName: string,
    waitMs: number,
    signal: AbortSignal,
  ): Promise<PostSlot | number | 'interrupted'> {
    const account = laneOf(this.accounts, accountId, this.clock.now());
    const host = laneOf(this.hosts, hostName, this.clock.now());
    const forget = () => {
      const now = this.clock.now();
      if (account.unused(now)) this.accounts.delete(accountId);
      if (host.unused(now)) this.hosts.delete(hostName);
    };
    const turnAway = (lane: Lane, width: number) => {
      const comeBackAt = lane.turnAway(this.clock.now(), width);
      forget();
      return comeBackAt;
    };
    if (host.held >= POSTS_PER_HOST + WAITING_PER_HOST) return turnAway(host, POSTS_PER_HOST);
    if (account.held >= SLOTS_PER_ACCOUNT) return turnAway(account, SLOTS_PER_ACCOUNT);
    account.held += 1;
    host.held += 1;
    const startedAt = host.posting.length < POSTS_PER_HOST ? startPost(host) : await waitForPost(host, waitMs, signal);
    if (startedAt === undefined) {
      account.held -= 1;
      host.held -= 1;
      if (!signal.aborted) return turnAway(host, POSTS_PER_HOST);
      forget();
      return 'interrupted';
    }
    account.posting.push(startedAt);
    return {
      give: () => {
        host.ended(startedAt);
        account.ended(startedAt);
        account.held -= 1;
        host.held -= 1;
        host.waiting.shift()?.();
        forget();
      },
    };
  }

  /** Hosts and accounts kept: those with posts, waiters, or deliveries turned away still to come back. */
  get lanes(): number {
    return this.hosts.size + this.accounts.size;
  }
}

/**
 * The lane of `key`, made if there is none. A lane whose deliveries turned away never came back
 * (their deliveries replayed, or their account erased) is dropped once enough lanes are kept.
 */
function laneOf(lanes: Map<string, Lane>, key: string, now: number): Lane {
  let lane = lanes.get(key);
  if (!lane) {
    if (lanes.size >= SWEEP_AT_LANES) for (const [other, kept] of lanes) if (kept.unused(now)) lanes.delete(other);
    lane = new Lane();
    lanes.set(key, lane);
  }
  return lane;
}

function startPost(host: Lane): number {
  const startedAt = performance.now();
  host.posting.push(startedAt);
  return startedAt;
}

/**
 * The start of the caller's post, begun as another post at the host ended (handed over
 * there, so no newcomer takes it meanwhile); undefined if none ended within waitMs or the
 * signal aborted first.
 */
function waitForPost(host: Lane, waitMs: number, signal: AbortSignal): Promise<number | undefined> {
  if (signal.aborted) return Promise.resolve(undefined);
  const waiting = host.waiting;
  return new Promise((resolve) => {
    const settle = (startedAt: number | undefined) => {
      clearTimeout(timer);
      signal.removeEventListener('abort', giveUp);
      resolve(startedAt);
    };
    const handOver = () => settle(startPost(host));
    const giveUp = () => {
      waiting.splice(waiting.indexOf(handOver), 1);
      settle(undefined);
    };
    const timer = setTimeout(giveUp, waitMs);
    signal.addEventListener('abort', giveUp, { once: true });
    waiting.push(handOver);
  });
}
