import type { Contact } from './types.ts';

/**
 * A person as the data-rights routes take one (docs/privacy.md): exactly one of a mobile (country
 * code and number, digits) or an email address. The API finds the rest of them, one hop.
 */
export type Person = { mobile: string } | { email: string };

/** The person of a contact: its mobile when it has one (as `GET /sms?recipient=` reads it), else its email. */
export function personOfContact(contact: Contact): Person | null {
  if (contact.mobileNumber !== null) return { mobile: `${contact.mobileCountryCode ?? ''}${contact.mobileNumber}` };
  if (contact.email !== null) return { email: contact.email };
  return null;
}

/** What names the person: the digits or the address, in words and in the export's file name. */
export const identifierOf = (person: Person): string => ('mobile' in person ? person.mobile : person.email);

/** The export file's name: `herald-export-<identifier>.json`. */
export const exportFileName = (person: Person): string => `herald-export-${identifierOf(person)}.json`;

/**
 * Whether what was typed to confirm an erasure names the person: a number with or without its
 * `+`, spaces, dashes and brackets; an address in any case, spaces around it left out.
 */
export function confirms(person: Person, typed: string): boolean {
  if ('mobile' in person) return typed.replace(/[\s+().-]/g, '') === person.mobile;
  return typed.trim().toLowerCase() === person.email.trim().toLowerCase();
}

/** One page of `GET /privacy/export`; the console keeps every field as the API gives it. */
export interface ExportPage {
  contacts: unknown[];
  lists: unknown[];
  sms: unknown[];
  email: unknown[];
  clicks: unknown[];
  suppressions: unknown[];
  inbound: unknown[];
  verifications: unknown[];
  nextCursor: string | null;
}

export type PersonExport = Omit<ExportPage, 'nextCursor'>;

const KEYS = ['contacts', 'lists', 'sms', 'email', 'clicks', 'suppressions', 'inbound', 'verifications'] as const;

/**
 * Every page of the person's export, joined into one: `fetchPage(undefined)` is the first page,
 * then each `nextCursor` is followed until it is null. The first page alone carries contacts,
 * lists, suppressions, replies and verifications; every page adds its messages and their clicks. `onPage` is told
 * how many messages are read so far.
 */
export async function exportEverything(
  fetchPage: (cursor: string | undefined) => Promise<ExportPage>,
  onPage: (messages: number) => void = () => {},
): Promise<PersonExport> {
  const joined: PersonExport = {
    contacts: [],
    lists: [],
    sms: [],
    email: [],
    clicks: [],
    suppressions: [],
    inbound: [],
    verifications: [],
  };
  let cursor: string | undefined;
  const seen = new Set<string>();
  do {
    const page = await fetchPage(cursor);
    for (const key of KEYS) joined[key].push(...page[key]);
    onPage(joined.sms.length + joined.email.length);
    cursor = page.nextCursor ?? undefined;
    // A cursor given twice would loop for ever: the API never does, but a page must move on.
    if (cursor !== undefined && seen.has(cursor)) throw new Error('The export gave the same page twice.');
    if (cursor !== undefined) seen.add(cursor);
  } while (cursor !== undefined);
  return joined;
}

/** `GET /privacy/erasures/{erasureId}`. */
export interface Erasure {
  erasureId: string;
  status: 'Processing' | 'Completed' | 'Failed';
  erased: { contacts: number; messages: number };
  createdAt: string;
  completedAt: string | null;
}

/** "Erased 1 contact and 4 messages." with the counts in the account's format. */
export function erasedWords(erased: Erasure['erased'], format: (n: number) => string = String): string {
  const count = (n: number, one: string, many: string) => `${format(n)} ${n === 1 ? one : many}`;
  const contacts = count(erased.contacts, 'contact', 'contacts');
  return `Erased ${contacts} and ${count(erased.messages, 'message', 'messages')}.`;
}
