/**
 * Times in the account's timeZoneOffset (`UTC+05:30~India Standard Time`, SPEC §5.3): a
 * fixed offset, so an instant is shown by shifting it and reading the shifted UTC fields.
 */
const PATTERN = /^UTC([+-])(\d{2}):(\d{2})/;

export interface Zone {
  offsetMinutes: number;
  /** `UTC+05:30`: what the console prints beside times. */
  label: string;
  locale: string;
}

export function zoneOf(timeZoneOffset: string, locale: string): Zone {
  const match = PATTERN.exec(timeZoneOffset);
  const minutes = match ? (Number(match[2]) * 60 + Number(match[3])) * (match[1] === '-' ? -1 : 1) : 0;
  return { offsetMinutes: minutes, label: match ? match[0] : 'UTC', locale: supportedLocale(locale) };
}

function supportedLocale(locale: string): string {
  try {
    return Intl.DateTimeFormat.supportedLocalesOf([locale.replace('_', '-')])[0] ?? 'en';
  } catch {
    return 'en';
  }
}

const shifted = (instant: string | number, zone: Zone) =>
  new Date(new Date(instant).getTime() + zone.offsetMinutes * 60_000);

/** Date and time to the second, in the account's offset. */
export function formatTime(instant: string | null, zone: Zone): string {
  if (instant === null) return '—';
  return new Intl.DateTimeFormat(zone.locale, { timeZone: 'UTC', dateStyle: 'medium', timeStyle: 'medium' }).format(
    shifted(instant, zone),
  );
}

/** The account's day holding the instant, as a date (Nov 22, 2026). */
export function formatDay(instant: number, zone: Zone): string {
  return new Intl.DateTimeFormat(zone.locale, { timeZone: 'UTC', dateStyle: 'medium' }).format(shifted(instant, zone));
}

/** The first instant (ms) of a `YYYY-MM-DD` day of the account's offset. */
export function dayStart(date: string, zone: Zone): number {
  return Date.parse(`${date}T00:00:00Z`) - zone.offsetMinutes * 60_000;
}

/** `YYYY-MM-DD` of the account's day holding the instant. */
export function localDate(instant: number, zone: Zone): string {
  return shifted(instant, zone).toISOString().slice(0, 10);
}

/** The day `days` after a `YYYY-MM-DD` (before it when negative). */
export function addDays(date: string, days: number): string {
  const day = new Date(`${date}T00:00:00Z`);
  day.setUTCDate(day.getUTCDate() + days);
  return day.toISOString().slice(0, 10);
}

/**
 * uPlot reads a Date's local fields to label its axes; this Date's local fields are the
 * instant's fields in the account's offset, whatever the browser's own zone.
 */
export function chartDate(seconds: number, zone: Zone): Date {
  const d = shifted(seconds * 1000, zone);
  return new Date(
    d.getUTCFullYear(),
    d.getUTCMonth(),
    d.getUTCDate(),
    d.getUTCHours(),
    d.getUTCMinutes(),
    d.getUTCSeconds(),
  );
}
