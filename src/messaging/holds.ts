import type { Kysely } from 'kysely';
import { clockTime, type QuietHours } from '../accounts/quiet-hours.ts';
import type { Schema } from '../db/schema.ts';
import { rowProperties, type PageRow } from './pipeline.ts';
// A type only: recipient-zone.ts loads libphonenumber, which the database thread must not
// (src/server/procedures.ts); a send's job is given it (src/server/worker.ts).
import type { RecipientZoneOf } from './recipient-zone.ts';
import type { LocalDelivery } from './schedule.ts';
import { instantOf, localTime, nextWallClock, type Zone } from './zone-time.ts';

/**
 * Recipients held at hand-over until a due time (ARCHITECTURE.md, "Preflight"): a batch SMS
 * whose recipient's local clock is inside the account's quiet hours when its page is about to
 * be handed over, and a recipient of a send delivered at a time on each recipient's clock
 * (deliverInRecipientTimeZone, SMS and email) before its clock reads it. It is not handed over:
 * it stays Queued, with `due_at` when it may go and its `reason` (reads show it Scheduled, with
 * `dueAt`), behind the send's cursor. No job per recipient: the send's own job, once its pass
 * is done, sleeps until the earliest `due_at` of its held recipients (messaging/pipeline.ts,
 * finishSend), then decides those due again and releases them (recipients.ts,
 * releaseDueRecipients) and sends them as any page, checked again. Checked per page, not once
 * at the start, so a campaign that starts at 20:55 holds the pages that reach 21:00.
 */

/** The reason a held recipient reads while it waits. */
export const QUIET_HOURS_REASON = 'quiet hours';

/** The reason a recipient waiting for its own clock's time (deliverInRecipientTimeZone) reads. */
export const LOCAL_TIME_REASON = 'recipient time zone';

/** A recipient held until `dueAt` (epoch ms), and why. */
export interface Hold {
  id: number;
  dueAt: number;
  reason: string;
}

const minutesOf = ({ hour, minute }: { hour: number; minute: number }) => hour * 60 + minute;

/**
 * The end of the window `instant` falls in, in `zone` (the next instant its clock reads `end`),
 * or null when `instant` is outside it. [start, end): a window that starts after it ends
 * crosses midnight.
 */
export function quietUntil(window: QuietHours, zone: Zone, instant: number): number | null {
  const now = minutesOf(localTime(zone, instant));
  const [start, end] = [minutesOf(clockTime(window.start)), minutesOf(clockTime(window.end))];
  const inside = start < end ? now >= start && now < end : now >= start || now < end;
  return inside ? nextWallClock(zone, instant, clockTime(window.end)) : null;
}

/** What a send's job knows to decide, for each of a page's recipients, whether it waits. */
export interface DueCheck {
  /** The account's quiet hours, for a batch; null: none. */
  window: QuietHours | null;
  /** deliverInRecipientTimeZone's time on each recipient's clock; null: none. */
  localDelivery: LocalDelivery | null;
  zoneOf: RecipientZoneOf;
  accountOffsetMinutes: number;
  /** The account's property names by id (messaging/pipeline.ts, propertyNames): the `timeZone` property's. */
  names: Map<string, string>;
}

/**
 * A page split at `now`: the rows to hand over, and those held with when each may go: until
 * its clock reads the send's local time (a time already past goes now), then until the end
 * of the quiet hours it falls in. The zone is found once a row, when it is reached: a contact
 * whose timeZone changes before then is sent at the new zone's time.
 */
export function splitDue(rows: PageRow[], check: DueCheck, now: number): { go: PageRow[]; held: Hold[] } {
  const go: PageRow[] = [];
  const held: Hold[] = [];
  // A page's recipients share a few zones: each zone's instant of the local time is found once.
  const instants = new Map<string | number, number>();
  const localInstant = (zone: Zone, local: LocalDelivery) => {
    const key = 'name' in zone ? zone.name : zone.offsetMinutes;
    const known = instants.get(key);
    if (known !== undefined) return known;
    const at = instantOf(zone, local);
    instants.set(key, at);
    return at;
  };
  for (const row of rows) {
    const { zone } = check.zoneOf(row.address, rowProperties(row, check.names), check.accountOffsetMinutes);
    const local = check.localDelivery && localInstant(zone, check.localDelivery);
    if (local && local > now) {
      held.push({ id: Number(row.id), dueAt: local, reason: LOCAL_TIME_REASON });
      continue;
    }
    const until = check.window && quietUntil(check.window, zone, now);
    if (until) held.push({ id: Number(row.id), dueAt: until, reason: QUIET_HOURS_REASON });
    else go.push(row);
  }
  return { go, held };
}

/**
 * Held recipients written, in the caller's transaction (the page's record): their `due_at`
 * and reason, and Scheduled in their history (read, never posted: no webhook event carries
 * it). One statement a due time: a page's recipients share a few zones, so a few.
 */
export async function holdRecipients(trx: Kysely<Schema>, held: Hold[], now: number): Promise<void> {
  if (held.length === 0) return;
  const written: number[] = [];
  for (const holds of Map.groupBy(held, (hold) => `${hold.dueAt} ${hold.reason}`).values()) {
    const [{ dueAt, reason }] = holds;
    // Only one still Queued: one an erasure or a cancel ended since the page was read stays ended.
    const rows = await trx
      .updateTable('send_recipients')
      .set({ due_at: dueAt, reason, updated_at: now })
      .where(
        'id',
        'in',
        holds.map((hold) => hold.id),
      )
      .where('status', '=', 'Queued')
      .returning('id')
      .execute();
    written.push(...rows.map((row) => Number(row.id)));
  }
  if (written.length === 0) return;
  await trx
    .insertInto('recipient_history')
    .values(written.map((id) => ({ recipient_id: id, status: 'Scheduled', at: now })))
    .execute();
}
