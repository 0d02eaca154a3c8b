import { offsetMinutes } from '../accounts/time-zone.ts';

/** scheduleDateTime (SPEC §1 rule 5, §2.1, §2.2, §2.7), the same for every channel. */

// RFC 3339 §5.6 date-time, the offset optional (read in the account's time zone when absent);
// the T may be a t or a space (§5.6, NOTE).
const DATE_TIME =
  /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))?$/;

/** Sends are scheduled at most this far ahead: a later time is far more likely a typo in the year than a plan. */
export const MAX_SCHEDULE_AHEAD_MS = 366 * 24 * 60 * 60 * 1000;

/**
 * A scheduleDateTime as epoch ms, null for now (a time in the past is now), or the problem in
 * words. An offset makes it an instant; without one it is a wall-clock time in the account's
 * time zone (ARCHITECTURE.md, "Decisions").
 */
export function scheduledTime(text: string, timeZoneOffset: string, now: number): number | null | string {
  const match = DATE_TIME.exec(text);
  if (!match) {
    return (
      'must be a date and time in RFC 3339, like 2026-11-23T14:00:00+05:30 (without the offset, it is read in ' +
      'the account time zone)'
    );
  }
  const [, year, month, day, hour, minute, second, fraction, zulu, sign, offsetHours, offsetMinutesText] = match;
  const y = Number(year);
  const m = Number(month);
  const d = Number(day);
  // RFC 3339 allows a leap second, 60; it is read as the last second of its minute.
  const s = Math.min(Number(second), 59);
  const daysInMonth = new Date(Date.UTC(2000 + (y % 400), m, 0)).getUTCDate();
  if (m < 1 || m > 12 || d < 1 || d > daysInMonth || Number(hour) > 23 || Number(minute) > 59 || Number(second) > 60) {
    return 'is not a date and time that exists: check the month, day, hours, minutes and seconds';
  }
  let offset: number;
  if (zulu !== undefined) offset = 0;
  else if (sign !== undefined) {
    if (Number(offsetHours) > 23 || Number(offsetMinutesText) > 59) return 'has an offset out of range: at most ±23:59';
    offset = (sign === '+' ? 1 : -1) * (Number(offsetHours) * 60 + Number(offsetMinutesText));
  } else {
    // The account's offset was checked when it was set.
    offset = offsetMinutes(timeZoneOffset) ?? 0;
  }
  const wallClock = new Date(0);
  wallClock.setUTCFullYear(y, m - 1, d);
  wallClock.setUTCHours(Number(hour), Number(minute), s, Number((fraction ?? '0').slice(0, 3).padEnd(3, '0')));
  const at = wallClock.getTime() - offset * 60_000;
  if (at <= now) return null;
  if (at - now > MAX_SCHEDULE_AHEAD_MS) return 'must be at most a year ahead';
  return at;
}
