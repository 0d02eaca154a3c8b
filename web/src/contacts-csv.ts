import Papa from 'papaparse';
import type { Contact } from './types.ts';

/**
 * Contacts to and from CSV, in the browser: a list's export, and an import checked row by row
 * before anything is sent. `POST /contacts/batch` refuses a whole batch for one bad contact, so
 * a row the API would refuse is caught here, with its line in the file, and never sent.
 */

/** The export's columns before the properties, one per property then, by name. */
export const CONTACT_CSV_COLUMNS = [
  'contactId',
  'email',
  'mobileCountryCode',
  'mobileNumber',
  'mobileOptIn',
  'emailOptIn',
] as const;

/** RFC 4180: fields quoted when they hold the delimiter, a quote or a line break; lines end in CRLF. */
export const toCsv = (rows: string[][]): string => `${Papa.unparse(rows, { newline: '\r\n' })}\r\n`;

export const contactCsvHeader = (properties: readonly string[]): string[] => [...CONTACT_CSV_COLUMNS, ...properties];

/** One contact as its export row; a property it has no value for is empty. */
export function contactCsvRow(contact: Contact, properties: readonly string[]): string[] {
  const values = new Map(contact.propertyfields.map((p) => [p.propertyname.toLowerCase(), p.propertyvalue]));
  return [
    String(contact.contactId),
    contact.email ?? '',
    contact.mobileCountryCode ?? '',
    contact.mobileNumber ?? '',
    String(contact.mobileOptIn),
    String(contact.emailOptIn),
    ...properties.map((name) => values.get(name.toLowerCase()) ?? ''),
  ];
}

/** A file's rows, each with the line it starts on (a quoted field may hold line breaks). */
export interface CsvFile {
  header: string[];
  rows: Array<{ line: number; cells: string[] }>;
  /** What Papa Parse found the fields separated by: a comma, a semicolon (Excel in many locales), a tab. */
  delimiter: string;
}

export function parseCsv(text: string): CsvFile {
  // Excel writes UTF-8 with a byte order mark; removing it shifts no line.
  const body = text.startsWith('\uFEFF') ? text.slice(1) : text;
  const rows: CsvFile['rows'] = [];
  const lines = lineCounter(body);
  let from = 0;
  let delimiter = ',';
  Papa.parse<string[]>(body, {
    skipEmptyLines: 'greedy',
    step: (result) => {
      // A row starts at the first character after the previous one that is not blank (skipped lines).
      let start = from;
      while (start < body.length && /\s/.test(body[start])) start++;
      rows.push({ line: lines(start), cells: result.data });
      from = result.meta.cursor;
      delimiter = result.meta.delimiter;
    },
  });
  const [first, ...rest] = rows;
  return { header: first?.cells.map((name) => name.trim()) ?? [], rows: rest, delimiter };
}

/**
 * The line of an offset, for offsets asked in increasing order: each call counts only the line
 * breaks since the last, so a file is read once (from the start each time, 100,000 rows would be
 * 5 billion steps). A break is LF, CRLF or a lone CR.
 */
function lineCounter(text: string): (offset: number) => number {
  let line = 1;
  let at = 0;
  return (offset) => {
    for (; at < offset; at++) {
      if (text[at] === '\n' || (text[at] === '\r' && text[at + 1] !== '\n')) line++;
    }
    return line;
  };
}

/** What a column of the file fills: a field of the contact, a property (`property:<name>`), or nothing. */
export type Target =
  | 'ignore'
  | 'contactId'
  | 'email'
  | 'mobileCountryCode'
  | 'mobileNumber'
  | 'mobileOptIn'
  | 'emailOptIn'
  | `property:${string}`;

export const FIELD_TARGETS: ReadonlyArray<[Target, string]> = [
  ['email', 'Email'],
  ['mobileCountryCode', 'Mobile country code'],
  ['mobileNumber', 'Mobile number'],
  ['mobileOptIn', 'SMS opt-in'],
  ['emailOptIn', 'Email opt-in'],
  ['contactId', 'Contact id'],
];

const squash = (name: string) => name.toLowerCase().replace(/[^a-z0-9]/g, '');

/** Words a header may use for a field, squashed (lower case, letters and digits only). */
const FIELD_NAMES: Record<string, Target> = {
  contactid: 'contactId',
  id: 'contactId',
  email: 'email',
  emailaddress: 'email',
  mail: 'email',
  mobilecountrycode: 'mobileCountryCode',
  countrycode: 'mobileCountryCode',
  mobilenumber: 'mobileNumber',
  mobile: 'mobileNumber',
  phone: 'mobileNumber',
  mobileoptin: 'mobileOptIn',
  smsoptin: 'mobileOptIn',
  emailoptin: 'emailOptIn',
};

/**
 * A first mapping from the header: a field by its name (the export's names among them), then a
 * property by its name in any case, spaces and punctuation aside (`First name` is firstName); the
 * rest ignored. Each field or property goes to one column only.
 */
export function guessMapping(header: readonly string[], properties: readonly string[]): Target[] {
  const taken = new Set<Target>();
  return header.map((name) => {
    const property = properties.find((p) => squash(p) === squash(name));
    const target: Target = FIELD_NAMES[squash(name)] ?? (property ? `property:${property}` : 'ignore');
    if (target === 'ignore' || taken.has(target)) return 'ignore';
    taken.add(target);
    return target;
  });
}

/** Problems with the mapping itself, before any row is read. */
export function mappingProblems(mapping: readonly Target[]): string[] {
  const problems: string[] = [];
  const used = mapping.filter((target) => target !== 'ignore');
  const twice = [...new Set(used.filter((target, i) => used.indexOf(target) !== i))];
  for (const target of twice) problems.push(`${targetLabel(target)} is chosen for more than one column.`);
  if (!used.some((t) => t === 'email' || t === 'mobileNumber' || t === 'contactId'))
    problems.push('Choose a column for the email, the mobile number or the contact id: each contact needs one.');
  if (used.includes('mobileNumber') !== used.includes('mobileCountryCode'))
    problems.push('A mobile needs both columns: its country code and its number.');
  return problems;
}

export function targetLabel(target: Target): string {
  if (target.startsWith('property:')) return `Property ${target.slice('property:'.length)}`;
  return FIELD_TARGETS.find(([t]) => t === target)?.[1] ?? 'Ignored';
}

/** A contact as `POST /contacts/batch` takes it. */
export interface ContactEntry {
  contactId?: number;
  email?: string;
  mobileCountryCode?: string;
  mobileNumber?: string;
  mobileOptIn?: boolean;
  emailOptIn?: boolean;
  propertyfields?: Array<{ propertyname: string; propertyvalue: string }>;
}

/**
 * The API's rules for one contact (docs/contacts.md), given by the page: the server's own
 * modules, so the two cannot disagree (contact-rules.ts).
 */
export interface ContactRules {
  emailAddressProblem(address: string): string | undefined;
  mobileFromParts(
    countryCode: string,
    number: string,
  ): { mobile: string } | { problems: { countryCode?: string; number?: string } };
}

export type CheckedRow = { line: number; entry: ContactEntry } | { line: number; problems: string[] };

/** A country code as people write it (`+91`, `+ 44`), as the API takes it: digits only. */
export const countryCodeDigits = (typed: string) => typed.trim().replace(/^\+\s*/, '');
/** A number as people write it (`98123 45678`, `7911-123.456`): spaces, dashes, dots and brackets left out. */
export const numberDigits = (typed: string) => typed.trim().replace(/[\s.()-]/g, '');

const CONTACT_ID = /^[1-9][0-9]{0,15}$/;
/** The API's property value: at most 4,000 characters (crm/schemas.ts). */
const MAX_PROPERTY_VALUE = 4000;
const YES = new Set(['true', 'yes', 'y', '1']);
const NO = new Set(['false', 'no', 'n', '0']);

/**
 * Each row as a contact, or its problems in words. A blank cell is an absent field, as the API
 * takes it (an update keeps the stored value). Spaces, dashes, dots and brackets in a mobile and a
 * `+` before its country code are left out: the API takes digits only.
 */
export function checkRows(file: CsvFile, mapping: readonly Target[], rules: ContactRules): CheckedRow[] {
  return file.rows.map(({ line, cells }) => {
    const problems: string[] = [];
    if (cells.length !== file.header.length)
      problems.push(`has ${cells.length} fields where the header has ${file.header.length}`);
    const entry: ContactEntry = {};
    const cell = (target: Target) => {
      const i = mapping.indexOf(target);
      return i < 0 ? '' : (cells[i] ?? '').trim();
    };

    const contactId = cell('contactId');
    if (contactId !== '') {
      if (CONTACT_ID.test(contactId) && Number.isSafeInteger(Number(contactId))) entry.contactId = Number(contactId);
      else problems.push(`contact id "${contactId}" must be a whole number from 1`);
    }

    const email = cell('email');
    if (email !== '') {
      const problem = rules.emailAddressProblem(email);
      if (problem) problems.push(`email "${email}" ${problem}`);
      else entry.email = email;
    }

    const countryCode = countryCodeDigits(cell('mobileCountryCode'));
    const number = numberDigits(cell('mobileNumber'));
    if (countryCode !== '' || number !== '') {
      if (countryCode === '') problems.push('a mobile number needs its country code');
      else if (number === '') problems.push('a country code needs its mobile number');
      else {
        const mobile = rules.mobileFromParts(countryCode, number);
        if ('problems' in mobile) {
          if (mobile.problems.countryCode)
            problems.push(`mobile country code "${countryCode}" ${mobile.problems.countryCode}`);
          if (mobile.problems.number) problems.push(`mobile number "${number}" ${mobile.problems.number}`);
        } else {
          entry.mobileCountryCode = countryCode;
          entry.mobileNumber = number;
        }
      }
    }

    for (const [target, label] of [
      ['mobileOptIn', 'SMS opt-in'],
      ['emailOptIn', 'email opt-in'],
    ] as const) {
      const value = cell(target).toLowerCase();
      if (YES.has(value)) entry[target] = true;
      else if (NO.has(value)) entry[target] = false;
      else if (value !== '') problems.push(`${label} "${cell(target)}" must be true, false or blank`);
    }

    for (const [i, target] of mapping.entries()) {
      if (!target.startsWith('property:')) continue;
      const value = cells[i] ?? '';
      if (value === '') continue;
      const propertyname = target.slice('property:'.length);
      if (value.length > MAX_PROPERTY_VALUE)
        problems.push(`${propertyname} is longer than ${MAX_PROPERTY_VALUE} characters`);
      else entry.propertyfields = [...(entry.propertyfields ?? []), { propertyname, propertyvalue: value }];
    }

    if (contactId === '' && email === '' && countryCode === '' && number === '')
      problems.push('needs an email, a mobile or a contact id');
    return problems.length > 0 ? { line, problems } : { line, entry };
  });
}

/** `POST /contacts/batch` takes at most 1,000 contacts (SPEC §8). */
export const BATCH_SIZE = 1000;

/** The good rows in batches of at most `size`, each entry with the line it came from. */
export function batchesOf(
  rows: readonly CheckedRow[],
  size = BATCH_SIZE,
): Array<{ lines: number[]; entries: ContactEntry[] }> {
  const good = rows.filter((row): row is { line: number; entry: ContactEntry } => 'entry' in row);
  const batches: Array<{ lines: number[]; entries: ContactEntry[] }> = [];
  for (let i = 0; i < good.length; i += size) {
    const part = good.slice(i, i + size);
    batches.push({ lines: part.map((row) => row.line), entries: part.map((row) => row.entry) });
  }
  return batches;
}

/**
 * A batch's refusal (400/422: `createUpdateContacts[17].email`) by the file's lines, so what the
 * API found can be fixed where it is.
 */
export function problemsByLine(
  lines: readonly number[],
  fields: ReadonlyArray<{ field: string; message: string }>,
): string[] {
  return fields.map(({ field, message }) => {
    const at = /^createUpdateContacts\[(\d+)\]\.?(.*)$/.exec(field);
    if (!at) return `${field} ${message}`;
    const line = lines[Number(at[1])];
    return `Line ${line ?? '?'}: ${at[2] === '' ? '' : `${at[2]} `}${message}`;
  });
}
