import type { FieldError } from '../errors.ts';
import { offsetMinutes } from '../accounts/time-zone.ts';

/** scheduleDateTime (SPEC §1 rule 5, §2.1, §2.2, §2.7), the same for every channel. */

// RFC 3339 §5.6 date-time, the offset optional (read in the account's time zone when absent);
// the T may be a t or a space (§5.6, NOTE).
const DATE_TIME =
  /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))?$/;

/** Sends are scheduled at most this far ahead: a later time is far more likely a typo in the year than a plan. */
export const MAX_SCHEDULE_AHEAD_MS = 366 * 24 * 60 * 60 * 1000;

/** A scheduleDateTime read: its wall-clock fields, and its offset in minutes east of UTC (null: none given). */
interface ReadDateTime {
  wall: { year: number; month: number; day: number; hour: number; minute: number; second: number; ms: number };
  offset: number | null;
}

const FORMAT_PROBLEM =
  'must be a date and time in RFC 3339, like 2026-11-23T14:00:00+05:30 (without the offset, it is read in ' +
  'the account time zone)';

function readDateTime(text: string): ReadDateTime | string {
  const match = DATE_TIME.exec(text);
  if (!match) return FORMAT_PROBLEM;
  const [, year, month, day, hour, minute, second, fraction, zulu, sign, offsetHours, offsetMinutesText] = match;
  const y = Number(year);
  const m = Number(month);
  const d = Number(day);
  const daysInMonth = new Date(Date.UTC(2000 + (y % 400), m, 0)).getUTCDate();
  if (m < 1 || m > 12 || d < 1 || d > daysInMonth || Number(hour) > 23 || Number(minute) > 59 || Number(second) > 60) {
    return 'is not a date and time that exists: check the month, day, hours, minutes and seconds';
  }
  let offset: number | null = null;
  if (zulu !== undefined) offset = 0;
  else if (sign !== undefined) {
    if (Number(offsetHours) > 23 || Number(offsetMinutesText) > 59) return 'has an offset out of range: at most ±23:59';
    offset = (sign === '+' ? 1 : -1) * (Number(offsetHours) * 60 + Number(offsetMinutesText));
  }
  // RFC 3339 allows a leap second, 60; it is read as the last second of its minute.
  const ms = Number((fraction ?? '0').slice(0, 3).padEnd(3, '0'));
  return {
    wall: {
      year: y,
      month: m,
      day: d,
      hour: Number(hour),
      minute: Number(minute),
      second: Math.min(Number(second), 59),
      ms,
    },
    offset,
  };
}

/** The wall-clock fields as if they were UTC, in epoch ms. */
function asUtc({ year, month, day, hour, minute, second, ms }: ReadDateTime['wall']): number {
  const at = new Date(0);
  at.setUTCFullYear(year, month - 1, day);
  at.setUTCHours(hour, minute, second, ms);
  return at.getTime();
}

/**
 * A scheduleDateTime as epoch ms, null for now (a time in the past is now), or the problem in
 * words. An offset makes it an instant; without one it is a wall-clock time in the account's
 * time zone (ARCHITECTURE.md, "Decisions").
 */
export function scheduledTime(text: string, timeZoneOffset: string, now: number): number | null | string {
  const read = readDateTime(text);
  if (typeof read === 'string') return read;
  // The account's offset was checked when it was set.
  const offset = read.offset ?? offsetMinutes(timeZoneOffset) ?? 0;
  const at = asUtc(read.wall) - offset * 60_000;
  if (at <= now) return null;
  if (at - now > MAX_SCHEDULE_AHEAD_MS) return 'must be at most a year ahead';
  return at;
}

/** The zones furthest ahead of UTC (Kiribati, +14:00) and behind it (−12:00), in minutes. */
const EARLIEST_ZONE = 14 * 60;
const LATEST_ZONE = -12 * 60;

/** A local time to deliver at in each recipient's zone (deliverInRecipientTimeZone), to the minute. */
export interface LocalDelivery {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
}

/**
 * A scheduleDateTime with deliverInRecipientTimeZone (ARCHITECTURE.md, "Preflight"): a
 * wall-clock time, without an offset, that each recipient gets in its own zone. Answers the
 * time, and when the send starts: the instant the first zone on Earth reaches it (null: now,
 * when that has passed; a recipient whose own time has passed is then sent to at once); or
 * the problem in words.
 */
export function localDelivery(text: string, now: number): { local: LocalDelivery; startsAt: number | null } | string {
  const read = readDateTime(text);
  if (typeof read === 'string') return read;
  if (read.offset !== null) {
    return "must have no offset with deliverInRecipientTimeZone: it is the time on each recipient's clock";
  }
  const wall = asUtc(read.wall);
  if (wall - LATEST_ZONE * 60_000 - now > MAX_SCHEDULE_AHEAD_MS) return 'must be at most a year ahead';
  const startsAt = wall - EARLIEST_ZONE * 60_000;
  const { year, month, day, hour, minute } = read.wall;
  return { local: { year, month, day, hour, minute }, startsAt: startsAt <= now ? null : startsAt };
}

/**
 * When a send goes, from its scheduleDateTime and deliverInRecipientTimeZone (at `prefix`, its
 * fields' path: '' or 'sendingDetails.'), each problem pushed to `errors`: `scheduledAt` as
 * scheduledTime reads it, or with deliverInRecipientTimeZone the start of localDelivery and
 * the local time itself.
 */
export function sendTime(
  given: { scheduleDateTime?: string; deliverInRecipientTimeZone?: boolean },
  timeZoneOffset: string,
  now: number,
  prefix: string,
  errors: FieldError[],
): { scheduledAt: number | null; localDelivery: LocalDelivery | null } {
  const none = { scheduledAt: null, localDelivery: null };
  if (given.deliverInRecipientTimeZone === true) {
    if (given.scheduleDateTime === undefined) {
      errors.push({
        field: `${prefix}deliverInRecipientTimeZone`,
        message: "needs scheduleDateTime: the time, without an offset, to deliver at on each recipient's clock",
      });
      return none;
    }
    const local = localDelivery(given.scheduleDateTime, now);
    if (typeof local === 'string') {
      errors.push({ field: `${prefix}scheduleDateTime`, message: local });
      return none;
    }
    return { scheduledAt: local.startsAt, localDelivery: local.local };
  }
  if (given.scheduleDateTime === undefined) return none;
  const at = scheduledTime(given.scheduleDateTime, timeZoneOffset, now);
  if (typeof at === 'string') {
    errors.push({ field: `${prefix}scheduleDateTime`, message: at });
    return none;
  }
  return { scheduledAt: at, localDelivery: null };
}
