import { type ContactEntry, countryCodeDigits, numberDigits } from './contacts-csv.ts';
import type { Contact } from './types.ts';

/** What the contact form holds: the fields as typed, each property by name. */
export type Draft = {
  email: string;
  mobileCountryCode: string;
  mobileNumber: string;
  mobileOptIn: boolean;
  emailOptIn: boolean;
  properties: Record<string, string>;
};

export const draftOf = (contact: Contact, properties: readonly string[]): Draft => {
  const values = new Map(contact.propertyfields.map((p) => [p.propertyname, p.propertyvalue]));
  return {
    email: contact.email ?? '',
    mobileCountryCode: contact.mobileCountryCode ?? '',
    mobileNumber: contact.mobileNumber ?? '',
    mobileOptIn: contact.mobileOptIn,
    emailOptIn: contact.emailOptIn,
    properties: Object.fromEntries(properties.map((name) => [name, values.get(name) ?? ''])),
  };
};

/**
 * The PATCH body of what the form changed, a mobile's parts as digits (as the import sends them).
 * A blank email or mobile is left out: the API keeps a blank field's value, so neither can be
 * removed (docs/contacts.md). A property emptied is sent empty, and the API keeps it so.
 */
export function patchOf(before: Draft, after: Draft): ContactEntry {
  const patch: ContactEntry = {};
  if (after.email.trim() !== before.email && after.email.trim() !== '') patch.email = after.email.trim();
  const cc = countryCodeDigits(after.mobileCountryCode);
  const number = numberDigits(after.mobileNumber);
  if ((cc !== before.mobileCountryCode || number !== before.mobileNumber) && (cc !== '' || number !== '')) {
    patch.mobileCountryCode = cc;
    patch.mobileNumber = number;
  }
  if (after.mobileOptIn !== before.mobileOptIn) patch.mobileOptIn = after.mobileOptIn;
  if (after.emailOptIn !== before.emailOptIn) patch.emailOptIn = after.emailOptIn;
  const changed = Object.keys(after.properties).filter((name) => after.properties[name] !== before.properties[name]);
  if (changed.length > 0)
    patch.propertyfields = changed.map((name) => ({ propertyname: name, propertyvalue: after.properties[name] }));
  return patch;
}
