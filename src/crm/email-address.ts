// A domain label: letters, digits and inner hyphens, at most 63 characters.
const LABEL = '[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?';

/**
 * The one rule for email addresses, for every module (the CRM's contacts today; email
 * sends, suppressions and senders later): WHATWG HTML's "valid email address", the rule
 * every browser's <input type=email> applies, so an address a form accepted is one Herald
 * accepts. It is ASCII only: an internationalised domain is given in its punycode
 * (xn--) form; a local part outside ASCII (RFC 6531, SMTPUTF8) is refused, as most
 * receiving servers still refuse it.
 * https://html.spec.whatwg.org/multipage/input.html#valid-e-mail-address
 */
const WHATWG_EMAIL = new RegExp(`^[a-zA-Z0-9.!#$%&'*+/=?^_\`{|}~-]+@${LABEL}(?:\\.${LABEL})*$`);

// RFC 5321 §4.5.3.1: a local part of at most 64 octets, a path of at most 256 (the address
// and its angle brackets), so 254 for the address.
const MAX_LOCAL_PART = 64;
export const MAX_EMAIL_ADDRESS = 254;

/** Why the address is not one Herald accepts, or undefined if it is. */
export function emailAddressProblem(address: string): string | undefined {
  if (address.length > MAX_EMAIL_ADDRESS) return `must be an email address of at most ${MAX_EMAIL_ADDRESS} characters`;
  if (/[\u0080-\uffff]/.test(address)) {
    return 'must be an email address in ASCII: give an internationalised domain in its xn-- form';
  }
  if (!WHATWG_EMAIL.test(address)) return 'must be an email address';
  if (address.indexOf('@') > MAX_LOCAL_PART)
    return `must be an email address whose part before @ is at most ${MAX_LOCAL_PART} characters`;
  return undefined;
}
