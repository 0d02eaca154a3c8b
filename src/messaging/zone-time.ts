/**
 * Wall-clock time in a recipient's zone (ARCHITECTURE.md, "Preflight": quiet hours and
 * deliverInRecipientTimeZone): an IANA zone, whose offsets and daylight saving time come from
 * the runtime's own time zone data through Intl (no table of ours), or a fixed offset from UTC,
 * the account's `timeZoneOffset`, which has no daylight saving time.
 *
 * Nothing here loads libphonenumber: the database thread may load it (src/server/procedures.ts).
 * Which zone a recipient is in: recipient-zone.ts.
 */

/** An IANA zone by its canonical name, or a fixed offset in minutes east of UTC. */
export type Zone = { name: string } | { offsetMinutes: number };

/** A local date and time: month 1–12, hour 0–23. */
export interface WallClock {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
}

const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;

/**
 * One formatter per zone name, made once: making one costs about 20 µs, formatting with it 2 µs.
 * The names are the runtime's own zones (a few hundred), as only a name it accepted is kept.
 */
const formatters = new Map<string, Intl.DateTimeFormat>();

function formatterOf(name: string): Intl.DateTimeFormat {
  let formatter = formatters.get(name);
  if (!formatter) {
    formatter = new Intl.DateTimeFormat('en-US', {
      timeZone: name,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formatters.set(name, formatter);
  }
  return formatter;
}

/**
 * The canonical name of an IANA zone given in any case (`europe/paris` is Europe/Paris), or
 * undefined for a name the runtime does not know. A fixed offset written as a name (`+02:00`)
 * is not a zone here.
 */
export function zoneName(given: string): string | undefined {
  if (names.has(given)) return names.get(given);
  const trimmed = given.trim();
  let name: string | undefined;
  if (trimmed !== '' && trimmed.length <= 64 && !/^[+-]/.test(trimmed)) {
    try {
      name = new Intl.DateTimeFormat('en-US', { timeZone: trimmed }).resolvedOptions().timeZone;
      formatterOf(name);
    } catch {
      name = undefined;
    }
  }
  // Contacts' values are few and repeat: each is resolved once (a formatter costs about 20 µs).
  if (names.size >= MAX_NAMES) names.clear();
  names.set(given, name);
  return name;
}

/** zoneName's answers by the value given, at most MAX_NAMES of them. */
const names = new Map<string, string | undefined>();
const MAX_NAMES = 10_000;

/** Minutes east of UTC in `zone` at `instant` (epoch ms), daylight saving time included. */
export function offsetAt(zone: Zone, instant: number): number {
  if ('offsetMinutes' in zone) return zone.offsetMinutes;
  const parts = formatterOf(zone.name).formatToParts(instant);
  const part = (type: Intl.DateTimeFormatPartTypes) => Number(parts.find((p) => p.type === type)!.value);
  const asUtc = Date.UTC(part('year'), part('month') - 1, part('day'), part('hour'), part('minute'), part('second'));
  return Math.round((asUtc - Math.floor(instant / 1000) * 1000) / MINUTE);
}

/** The local date and time in `zone` at `instant`. */
export function localTime(zone: Zone, instant: number): WallClock {
  const local = new Date(instant + offsetAt(zone, instant) * MINUTE);
  return {
    year: local.getUTCFullYear(),
    month: local.getUTCMonth() + 1,
    day: local.getUTCDate(),
    hour: local.getUTCHours(),
    minute: local.getUTCMinutes(),
  };
}

/**
 * The first instant at which the clock in `zone` reads `wall` (seconds 0), or, when daylight
 * saving time skips it (02:30 on the night clocks go from 02:00 to 03:00), the instant the
 * clock jumps past it. A time the clocks read twice (when they go back) is its first.
 */
export function instantOf(zone: Zone, wall: WallClock): number {
  return instantsOf(zone, wall)[0];
}

/**
 * Every instant the clock in `zone` reads `wall`, earliest first: one, or two on the night the
 * clocks go back; for a time they skip, the instant they jump past it.
 */
function instantsOf(zone: Zone, wall: WallClock): number[] {
  const asUtc = Date.UTC(wall.year, wall.month - 1, wall.day, wall.hour, wall.minute);
  if ('offsetMinutes' in zone) return [asUtc - zone.offsetMinutes * MINUTE];
  // A zone changes its offset at most once in any day (every zone in the tz database does),
  // so the offsets a day either side are the only two the wall time can be read with.
  const reads = (at: number) => at + offsetAt(zone, at) * MINUTE;
  const candidates = [...new Set([offsetAt(zone, asUtc - DAY), offsetAt(zone, asUtc + DAY)])]
    .map((offset) => asUtc - offset * MINUTE)
    .sort((a, b) => a - b);
  const exact = candidates.filter((at) => reads(at) === asUtc);
  if (exact.length > 0) return exact;
  // Skipped: the clock reads before `wall` until the change and after it from then on.
  let [before, after] = [candidates[0], candidates[candidates.length - 1]];
  while (after - before > 1000) {
    const middle = before + Math.floor((after - before) / 2000) * 1000;
    if (reads(middle) >= asUtc) after = middle;
    else before = middle;
  }
  return [after];
}

/**
 * The first instant after `instant` at which the clock in `zone` reads `hour`:`minute` (or
 * jumps past it: instantOf). Today's, if still to come; else tomorrow's. On the night the
 * clocks go back a time read twice is still to come between its two readings: a recipient
 * inside quiet hours that end in the repeated hour waits for the second, not for tomorrow.
 */
export function nextWallClock(zone: Zone, instant: number, time: { hour: number; minute: number }): number {
  const today = localTime(zone, instant);
  for (let days = 0; ; days++) {
    const date = new Date(Date.UTC(today.year, today.month - 1, today.day + days));
    const wall = { year: date.getUTCFullYear(), month: date.getUTCMonth() + 1, day: date.getUTCDate(), ...time };
    const next = instantsOf(zone, wall).find((at) => at > instant);
    if (next !== undefined) return next;
  }
}
