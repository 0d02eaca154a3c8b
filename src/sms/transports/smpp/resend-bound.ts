/** A connection of the process as the resend bound sees it (the SMPP transport). */
export interface BoundShare {
  /** Its parts sent and not yet recorded: answered or not, a crash would send them again. */
  readonly unrecorded: number;
  /** Its binds × window; for a campaign's parts, binds × the window's campaign share. */
  slots(urgent: boolean): number;
  /** Whether it has parts waiting that a bind of its own could take now. */
  wantsSlots(): boolean;
  /** Hands its waiting parts to its binds, as far as the bound allows. */
  pump(): void;
}

/**
 * What a crash of a worker process may send a second time, bounded across its SMPP connections:
 * parts submitted whose answers are not yet recorded, at most the sum of the connections'
 * binds × window (of the windows' campaign share, for a campaign's parts). A bind takes a part
 * while it has fewer than `window` submits unanswered, which is SMPP's own limit; the bound is
 * counted until the answer is recorded, which takes a database write. Each connection may always
 * fill its own binds × window; while no other connection has parts waiting, it may also use
 * their share. A campaign whose numbers take one route and then another (a list sorted by
 * number, split by prefix) uses one connection at a time; with only that connection's share,
 * its binds would sit waiting for the database to record answers while the others' share idled.
 */
export class ResendBound {
  private readonly shares = new Set<BoundShare>();

  join(share: BoundShare): void {
    this.shares.add(share);
  }

  leave(share: BoundShare): void {
    this.shares.delete(share);
    this.released(share);
  }

  /** Whether `share` may send one more part (a passcode's if `urgent`) within the bound. */
  allows(share: BoundShare, urgent: boolean): boolean {
    let unrecorded = 0;
    let slots = 0;
    let othersWait = false;
    for (const each of this.shares) {
      unrecorded += each.unrecorded;
      slots += each.slots(urgent);
      if (each !== share && !othersWait) othersWait = each.wantsSlots();
    }
    if (unrecorded >= slots) return false;
    return share.unrecorded < share.slots(urgent) || !othersWait;
  }

  /** `from` recorded or gave up parts: the others may take what it freed. */
  released(from: BoundShare): void {
    for (const each of this.shares) if (each !== from) each.pump();
  }
}
