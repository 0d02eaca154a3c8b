import { getAllCountries, getTimezone } from 'countries-and-timezones';
import { countryOfMobile } from '../crm/mobile-number.ts';
import { zoneName, type Zone } from './zone-time.ts';

/**
 * A recipient's zone (ARCHITECTURE.md, "Preflight", deliverInRecipientTimeZone; quiet hours
 * take the same): the contact property `timeZone` when it holds an IANA name, else its number's
 * country when that country keeps one time, else the account's fixed offset, which has no
 * daylight saving time. How a zone's clock reads at an instant: zone-time.ts.
 *
 * This module loads libphonenumber's metadata: keep it out of the modules the SQLite thread
 * loads (src/server/procedures.ts). A send's job is given it (src/server/worker.ts).
 */

/** Where a recipient's zone came from. */
export type ZoneSource = 'property' | 'country' | 'account';

/** Which zone a recipient is in, and why: what a send's job is given (src/server/worker.ts). */
export type RecipientZoneOf = (
  mobile: string,
  properties: ReadonlyMap<string, string> | null,
  accountOffsetMinutes: number,
) => { zone: Zone; source: ZoneSource };

/** The contact property naming a recipient's zone, lower-cased: property names are case-insensitive. */
export const TIME_ZONE_PROPERTY = 'timezone';

/**
 * Each country's zone, for the countries that keep one time, from the maintained
 * countries-and-timezones dataset (the IANA tz database's zone.tab). A country keeps one
 * time when it has one zone (France: Europe/Paris), or when its zones keep the same
 * standard and summer offsets (Germany: Europe/Berlin, and Büsingen's Europe/Zurich), the
 * first of them then; one with zones of different offsets (the United States, Spain with the
 * Canaries) has none here, and its recipients take the account's offset.
 */
const COUNTRY_ZONES: ReadonlyMap<string, string> = new Map(
  Object.values(getAllCountries()).flatMap((country): Array<[string, string]> => {
    const zones = country.timezones.map((name) => getTimezone(name)).filter((zone) => zone !== null);
    if (zones.length === 0) return [];
    const [first] = zones;
    const oneTime = zones.every((z) => z.utcOffset === first.utcOffset && z.dstOffset === first.dstOffset);
    return oneTime && zoneName(first.name) !== undefined ? [[country.id, first.name]] : [];
  }),
);

/** The zone of the country (ISO 3166 alpha-2) when it keeps one time, else undefined. */
export function countryZone(country: string): string | undefined {
  return COUNTRY_ZONES.get(country);
}

/**
 * The zone of a recipient: `mobile` (E.164 digits), its contact's properties by lower-cased
 * name (null for none) and the account's offset in minutes east of UTC. A `timeZone` that is
 * no IANA name the runtime knows is passed over, as if unset.
 */
export const recipientZone: RecipientZoneOf = (mobile, properties, accountOffsetMinutes) => {
  const given = properties?.get(TIME_ZONE_PROPERTY);
  const named = given === undefined ? undefined : zoneName(given);
  if (named !== undefined) return { zone: { name: named }, source: 'property' };
  const country = countryZone(countryOfMobile(mobile));
  if (country !== undefined) return { zone: { name: country }, source: 'country' };
  return { zone: { offsetMinutes: accountOffsetMinutes }, source: 'account' };
};

/**
 * An email recipient's zone: as recipientZone's, but an address has no country, even when its
 * local part reads as a number (`+33612345678@mail.fr`): its property, else the account's offset.
 */
export const emailRecipientZone: RecipientZoneOf = (_address, properties, accountOffsetMinutes) =>
  recipientZone('', properties, accountOffsetMinutes);
