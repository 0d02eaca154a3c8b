/**
 * The API's own rules for a contact's email and mobile (src/crm/), loaded by the import page when
 * it checks a file: the mobile rule brings libphonenumber-js's mobile metadata (about 100 kB),
 * which no other page needs. Being the server's modules, the console's check cannot drift from
 * the API's: a row it passes is one the API takes.
 */
export { emailAddressProblem } from '../../src/crm/email-address.ts';
export { mobileFromParts } from '../../src/crm/mobile-number.ts';
