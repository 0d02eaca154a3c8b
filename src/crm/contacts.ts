import type { Kysely, Selectable } from 'kysely';
import { parsePhoneNumberFromString } from 'libphonenumber-js/mobile';
import type { Clock } from '../clock.ts';
import type { DialectName } from '../db/database.ts';
import type { ContactsTable, Schema } from '../db/schema.ts';
import { AppError, badRequest, notFound } from '../errors.ts';
import { cursorCodec } from '../http/cursor.ts';
import { prepareBatch } from './batches.ts';
import type { PatchContact } from './manage.ts';
import type { ContactPatch } from './schemas.ts';
import { defaultListId, requireList } from './setup.ts';
import { checkContacts } from './validate.ts';

type Db = Kysely<Schema>;
type ContactRecord = Selectable<ContactsTable>;

export interface ContactView {
  contactId: number;
  email: string | null;
  mobileCountryCode: string | null;
  mobileNumber: string | null;
  mobileOptIn: boolean;
  emailOptIn: boolean;
  propertyfields: Array<{ propertyid: string; propertyname: string; propertyvalue: string }>;
  listIds: string[];
  createdAt: string;
  updatedAt: string;
}

/** Contacts as the API shows them: with their property names and the lists they are in. */
async function contactViews(db: Db, accountId: string, rows: ContactRecord[]): Promise<ContactView[]> {
  if (rows.length === 0) return [];
  const allContacts = await defaultListId(db, accountId);
  const ids = rows.map((row) => Number(row.id));
  // contact_id alone is not a contact: the same id is another contact in another account's lists.
  const memberships = await db
    .selectFrom('list_members as m')
    .innerJoin('contact_lists as l', 'l.id', 'm.list_id')
    .select(['m.contact_id', 'm.list_id'])
    .where('l.account_id', '=', accountId)
    .where('m.contact_id', 'in', ids)
    .orderBy('m.added_at')
    .orderBy('m.list_id')
    .execute();
  const lists = new Map<number, string[]>();
  for (const m of memberships) {
    const id = Number(m.contact_id);
    lists.set(id, [...(lists.get(id) ?? []), m.list_id]);
  }
  const properties = rows.map((row) => JSON.parse(row.properties) as Record<string, string>);
  const propertyIds = [...new Set(properties.flatMap((p) => Object.keys(p)))];
  const names = new Map<string, string>();
  if (propertyIds.length > 0) {
    const named = await db
      .selectFrom('contact_properties')
      .select(['id', 'name'])
      .where('account_id', '=', accountId)
      .where('id', 'in', propertyIds)
      .execute();
    for (const p of named) names.set(p.id, p.name);
  }
  return rows.map((row, i) => {
    const id = Number(row.id);
    const countryCode = row.mobile_country_code;
    return {
      contactId: id,
      email: row.email,
      mobileCountryCode: countryCode,
      mobileNumber: row.mobile !== null && countryCode !== null ? row.mobile.slice(countryCode.length) : null,
      mobileOptIn: Boolean(row.mobile_opt_in),
      emailOptIn: Boolean(row.email_opt_in),
      propertyfields: Object.entries(properties[i]).map(([propertyid, propertyvalue]) => ({
        propertyid,
        propertyname: names.get(propertyid) ?? '',
        propertyvalue,
      })),
      listIds: [allContacts, ...(lists.get(id) ?? [])],
      createdAt: new Date(row.created_at).toISOString(),
      updatedAt: new Date(row.updated_at).toISOString(),
    };
  });
}

export async function findContact(db: Db, accountId: string, contactId: number): Promise<ContactView> {
  const row = await db
    .selectFrom('contacts')
    .selectAll()
    .where('id', '=', contactId)
    .where('account_id', '=', accountId)
    .executeTakeFirst();
  if (!row) throw notFound('The contact');
  return (await contactViews(db, accountId, [row]))[0];
}

/**
 * Every contact of the account holding one of these numbers (E.164 digits) or addresses (as
 * stored: lower-cased), in id order, shown as `GET /contacts/{id}` shows them: a person's
 * contacts for a subject access request (privacy/export.ts). Two seeks, on the contacts_mobile
 * and contacts_email indexes, rather than one OR that a planner may answer with a scan.
 */
export async function contactsHolding(
  db: Db,
  accountId: string,
  identifiers: { mobiles: readonly string[]; emails: readonly string[] },
): Promise<ContactView[]> {
  const holding = (column: 'mobile' | 'email', values: readonly string[]) =>
    values.length === 0
      ? []
      : db.selectFrom('contacts').selectAll().where('account_id', '=', accountId).where(column, 'in', values).execute();
  const found = [...(await holding('mobile', identifiers.mobiles)), ...(await holding('email', identifiers.emails))];
  const rows = [...new Map(found.map((row) => [Number(row.id), row])).values()].sort(
    (a, b) => Number(a.id) - Number(b.id),
  );
  return contactViews(db, accountId, rows);
}

/** One search answers at most this many contacts (several may share an email or a mobile). */
const SEARCH_LIMIT = 100;

/**
 * Contacts with this email and/or this mobile (country code and number, digits), written
 * the way the batch stores them: the email lower-cased, the mobile as E.164 digits.
 */
export async function searchContacts(
  db: Db,
  accountId: string,
  query: { email?: string; mobile?: string },
): Promise<ContactView[]> {
  if (query.email === undefined && query.mobile === undefined) {
    throw badRequest('Give email, mobile or both.', [{ field: 'email', message: 'or mobile is required' }]);
  }
  let select = db.selectFrom('contacts').selectAll().where('account_id', '=', accountId);
  if (query.email !== undefined) select = select.where('email', '=', query.email.trim().toLowerCase());
  if (query.mobile !== undefined) {
    const phone = parsePhoneNumberFromString(`+${query.mobile}`);
    select = select.where('mobile', '=', phone?.isValid() ? phone.number.slice(1) : query.mobile);
  }
  return contactViews(db, accountId, await select.orderBy('id').limit(SEARCH_LIMIT).execute());
}

export interface ContactPage {
  contacts: ContactView[];
  nextCursor: string | null;
}

// The cursor names the last contact id shown: pages go in id order, each one an index
// range scan however deep it is (list_members' key (list_id, contact_id), or contacts'
// (account_id, id) for `All contacts`).
const cursor = cursorCodec(['integer']);

/** A page of a list's contacts, for the API and for the SMS and email modules' list expansion. */
export async function listContactsPage(
  db: Db,
  accountId: string,
  listId: string,
  page: { limit: number; cursor?: string },
): Promise<ContactPage> {
  await requireList(db, accountId, listId);
  const after = page.cursor === undefined ? 0 : cursor.decode(page.cursor)[0];
  const rows =
    listId === (await defaultListId(db, accountId))
      ? await db
          .selectFrom('contacts')
          .selectAll()
          .where('account_id', '=', accountId)
          .where('id', '>', after)
          .orderBy('id')
          .limit(page.limit + 1)
          .execute()
      : await db
          .selectFrom('list_members as m')
          .innerJoin('contacts as c', (join) =>
            join.on('c.account_id', '=', accountId).onRef('c.id', '=', 'm.contact_id'),
          )
          .selectAll('c')
          .where('m.list_id', '=', listId)
          .where('m.contact_id', '>', after)
          .orderBy('m.contact_id')
          .limit(page.limit + 1)
          .execute();
  const { rows: shown, nextCursor } = cursor.page(rows, page.limit, (last) => [Number(last.id)]);
  return { contacts: await contactViews(db, accountId, shown), nextCursor };
}

/**
 * PATCH /contacts/{contactId}'s checks, before any transaction: the fields go through the
 * batch's own steps as one entry naming the contact (validate.ts, then prepareBatch for the
 * properties), so every rule is the batch's. Its problems are answered by field name.
 */
export async function preparePatch(
  db: Db,
  deps: { dialect: DialectName; clock: Clock },
  accountId: string,
  contactId: number,
  fields: ContactPatch,
): Promise<PatchContact> {
  const request = { createUpdateContacts: [{ ...fields, contactId }] };
  try {
    const checked = await checkContacts(request.createUpdateContacts);
    const prepared = await prepareBatch(db, deps, accountId, request, checked);
    return { accountId, contactId, job: prepared.job, now: prepared.acceptedAt };
  } catch (error) {
    if (!(error instanceof AppError)) throw error;
    const errors = error.errors.map((e) => ({ ...e, field: e.field.replace(/^createUpdateContacts\[0\]\.?/, '') }));
    const problems = `${errors.length} problem${errors.length === 1 ? '' : 's'}`;
    throw new AppError(error.statusCode, `The contact was not changed: ${problems}.`, { errors, data: error.data });
  }
}
