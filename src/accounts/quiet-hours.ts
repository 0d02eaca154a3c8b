import { badRequest } from '../errors.ts';

/**
 * Quiet hours per account (ARCHITECTURE.md, "Preflight"): a batch SMS is not handed over
 * while its recipient's local clock is within [start, end) and waits for the end. `start`
 * after `end` crosses midnight (21:00–08:00); null is off, the default. Held where a page is
 * handed over: sms/quiet-hours.ts.
 */
export interface QuietHours {
  /** "HH:MM", 24-hour. */
  start: string;
  end: string;
}

/** "HH:MM", 00:00 to 23:59: what the route's schema takes too. */
export const CLOCK_TIME = '^([01][0-9]|2[0-3]):[0-5][0-9]$';

/** The account's quiet hours from accounts.quiet_hours, null when off. */
export function quietHoursOf(stored: string | null): QuietHours | null {
  return stored === null ? null : (JSON.parse(stored) as QuietHours);
}

/** A window that is one (400 otherwise), as accounts.quiet_hours keeps it; null for off. */
export function storedQuietHours(given: QuietHours | null): string | null {
  if (given === null) return null;
  const problems = (['start', 'end'] as const)
    .filter((field) => !new RegExp(CLOCK_TIME).test(given[field]))
    .map((field) => ({ field: `quietHours.${field}`, message: 'must be a time of day as HH:MM, 00:00 to 23:59' }));
  if (problems.length === 0 && given.start === given.end) {
    problems.push({ field: 'quietHours.end', message: 'must differ from start: a window of no time, or of all day' });
  }
  if (problems.length > 0) throw badRequest('The quiet hours are not a window of the day.', problems);
  return JSON.stringify({ start: given.start, end: given.end });
}

/** "HH:MM" as its hour and minute. */
export function clockTime(text: string): { hour: number; minute: number } {
  return { hour: Number(text.slice(0, 2)), minute: Number(text.slice(3, 5)) };
}
