import type { Kysely } from 'kysely';
import type { Schema } from '../db/schema.ts';

/**
 * The account time zone in the spec's form `UTC+05:30~India Standard Time` (SPEC §5.3):
 * a fixed offset from UTC and a display name.
 */
const PATTERN = /^UTC([+-])(\d{2}):(\d{2})~(\S.{0,99})$/;

export const DEFAULT_TIME_ZONE_OFFSET = 'UTC+00:00~Coordinated Universal Time';

/** Minutes east of UTC, or undefined when the text is not in the spec's form or out of range. */
export function offsetMinutes(value: string): number | undefined {
  const match = PATTERN.exec(value);
  if (!match) return undefined;
  const hours = Number(match[2]);
  const minutes = Number(match[3]);
  // Real offsets run from UTC−12:00 to UTC+14:00, in whole quarter hours (UTC+05:45 Nepal).
  if (minutes % 15 !== 0 || minutes > 45) return undefined;
  const total = hours * 60 + minutes;
  if (match[1] === '+' ? total > 14 * 60 : total > 12 * 60) return undefined;
  return match[1] === '+' ? total : -total;
}

/** The account's offset in minutes east of UTC, as a send's job reads it for its recipients' zones (0 if unset). */
export async function accountOffsetMinutes(db: Kysely<Schema>, accountId: string): Promise<number> {
  const account = await db
    .selectFrom('accounts')
    .select('time_zone_offset')
    .where('id', '=', accountId)
    .executeTakeFirst();
  return offsetMinutes(account?.time_zone_offset ?? '') ?? 0;
}
