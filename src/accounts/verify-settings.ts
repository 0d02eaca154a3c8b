import { badRequest, type FieldError } from '../errors.ts';

/**
 * Verify's fraud guard per account (ARCHITECTURE.md, "Verify"): the countries codes may go to
 * (null: all) and how many verifications may go in 10 minutes to numbers sharing a prefix.
 */
export interface VerifySettings {
  allowedCountries: string[] | null;
  prefixLimit: number;
}

export const DEFAULT_VERIFY_SETTINGS: VerifySettings = { allowedCountries: null, prefixLimit: 10 };

/** The account's settings from accounts.verify. */
export function verifySettings(stored: string | null): VerifySettings {
  if (stored === null) return DEFAULT_VERIFY_SETTINGS;
  return { ...DEFAULT_VERIFY_SETTINGS, ...(JSON.parse(stored) as Partial<VerifySettings>) };
}

/**
 * Refuses a change whose fields are not valid: 400 naming each bad field. `isCountry` tells an
 * ISO 3166 alpha-2 code of a country with mobile numbers.
 */
export function checkVerifySettingsChange(change: Partial<VerifySettings>, isCountry: (code: string) => boolean): void {
  const errors: FieldError[] = [];
  change.allowedCountries?.forEach((code, i) => {
    if (!isCountry(code))
      errors.push({
        field: `verify.allowedCountries[${i}]`,
        message: 'must be an ISO 3166 alpha-2 country code in capitals, such as "GB"',
      });
  });
  if (errors.length > 0) throw badRequest('The Verify settings are not valid.', errors);
}

/** `current` with the fields `change` gives, only those. */
export function changedVerifySettings(current: VerifySettings, change: Partial<VerifySettings>): VerifySettings {
  const countries = change.allowedCountries;
  return {
    allowedCountries: countries === undefined ? current.allowedCountries : countries && [...new Set(countries)],
    prefixLimit: change.prefixLimit ?? current.prefixLimit,
  };
}
