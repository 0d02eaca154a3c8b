import { randomUUID } from 'node:crypto';
import type { Kysely, Selectable } from 'kysely';
import type { Clock } from '../clock.ts';
import type { ContactListsTable, ContactPropertiesTable, Schema } from '../db/schema.ts';
import { isUniqueViolation } from '../db/errors.ts';
import { badRequest, conflict, notFound, vanished } from '../errors.ts';
import { postProcedure } from '../http/idempotency.ts';

type Db = Kysely<Schema>;
type ListRow = Selectable<ContactListsTable>;
type PropertyRow = Selectable<ContactPropertiesTable>;

export const DEFAULT_LIST_NAME = 'All contacts';
const MAX_NAME_LENGTH = 100;

export interface ListView {
  listId: string;
  name: string;
  createdAt: string;
}

export interface PropertyView {
  propertyid: string;
  propertyname: string;
}

const listView = (row: ListRow): ListView => ({
  listId: row.id,
  name: row.name,
  createdAt: new Date(row.created_at).toISOString(),
});
const propertyView = (row: PropertyRow): PropertyView => ({ propertyid: row.id, propertyname: row.name });

/** Names are compared case-insensitively, so `firstName` and `FirstName` are one property. */
export const nameKey = (name: string) => name.trim().toLowerCase();

export function checkName(name: string, field: string): string {
  const trimmed = name.trim();
  if (trimmed.length === 0 || trimmed.length > MAX_NAME_LENGTH) {
    throw badRequest(`The ${field} must be 1 to ${MAX_NAME_LENGTH} characters.`, [
      { field, message: `must be 1 to ${MAX_NAME_LENGTH} characters` },
    ]);
  }
  return trimmed;
}

/** Called in the transaction that creates the account: every account has its `All contacts`. */
export async function createDefaultList(db: Db, clock: Clock, accountId: string): Promise<void> {
  await db
    .insertInto('contact_lists')
    .values({
      id: randomUUID(),
      account_id: accountId,
      name: DEFAULT_LIST_NAME,
      name_key: nameKey(DEFAULT_LIST_NAME),
      is_default: true,
      created_at: clock.now(),
    })
    .execute();
}

export async function createList(db: Db, clock: Clock, accountId: string, name: string): Promise<ListView> {
  const checked = checkName(name, 'name');
  try {
    const row = await db
      .insertInto('contact_lists')
      .values({
        id: randomUUID(),
        account_id: accountId,
        name: checked,
        name_key: nameKey(checked),
        is_default: false,
        created_at: clock.now(),
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    return listView(row);
  } catch (error) {
    if (isUniqueViolation(error)) throw listNameTaken(checked);
    throw error;
  }
}

/** POST /lists and PATCH /lists/{listId} answer a taken name alike. */
const listNameTaken = (name: string) =>
  conflict(`A list named ${name} already exists.`, [{ field: 'name', message: 'is already taken' }]);

/** `All contacts` is every contact of the account by its definition: it keeps its name and is never deleted. */
export const allContactsFixed = (what: string) =>
  conflict(`\`${DEFAULT_LIST_NAME}\` is every contact of the account: it cannot be ${what}.`);

/**
 * Renames the account's list by the rules of createList (404 for a list it does not have,
 * 409 for `All contacts` or a name another list has), in the caller's transaction.
 */
export async function renameListRow(db: Db, accountId: string, listId: string, name: string): Promise<ListView> {
  const checked = checkName(name, 'name');
  const list = await db
    .selectFrom('contact_lists')
    .select('is_default')
    .where('id', '=', listId)
    .where('account_id', '=', accountId)
    .executeTakeFirst();
  if (!list) throw notFound('The list');
  if (list.is_default) throw allContactsFixed('renamed');
  try {
    const row = await db
      .updateTable('contact_lists')
      .set({ name: checked, name_key: nameKey(checked) })
      .where('id', '=', listId)
      .where('account_id', '=', accountId)
      .returningAll()
      .executeTakeFirstOrThrow();
    return listView(row);
  } catch (error) {
    if (isUniqueViolation(error)) throw listNameTaken(checked);
    throw error;
  }
}

/** POST /lists: the list, created in the request's transaction (http/idempotency.ts). */
export const postList = postProcedure(
  import.meta.url,
  'postList',
  async ({ db }, args: { accountId: string; name: string; now: number }) => ({
    statusCode: 201,
    body: await createList(db, { now: () => args.now }, args.accountId, args.name),
  }),
);

export async function listLists(db: Db, accountId: string): Promise<ListView[]> {
  const rows = await db
    .selectFrom('contact_lists')
    .selectAll()
    .where('account_id', '=', accountId)
    .orderBy('is_default', 'desc')
    .orderBy('created_at')
    .orderBy('id')
    .execute();
  return rows.map(listView);
}

/** The account's list, or undefined: another account's list is as unknown as a missing one. */
export async function findListId(db: Db, accountId: string, listId: string): Promise<string | undefined> {
  const row = await db
    .selectFrom('contact_lists')
    .select('id')
    .where('id', '=', listId)
    .where('account_id', '=', accountId)
    .executeTakeFirst();
  return row?.id;
}

export async function defaultListId(db: Db, accountId: string): Promise<string> {
  const row = await db
    .selectFrom('contact_lists')
    .select('id')
    .where('account_id', '=', accountId)
    .where('is_default', '=', true)
    .executeTakeFirst();
  // Every account has its default list until the account is deleted.
  if (!row) throw vanished();
  return row.id;
}

export async function requireList(db: Db, accountId: string, listId: string): Promise<string> {
  const id = await findListId(db, accountId, listId);
  if (!id) throw notFound('The list');
  return id;
}

export async function createProperty(db: Db, clock: Clock, accountId: string, name: string): Promise<PropertyView> {
  const checked = checkName(name, 'propertyname');
  try {
    const row = await db
      .insertInto('contact_properties')
      .values({
        id: randomUUID(),
        account_id: accountId,
        name: checked,
        name_key: nameKey(checked),
        created_at: clock.now(),
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    return propertyView(row);
  } catch (error) {
    if (isUniqueViolation(error)) {
      throw conflict(`A property named ${checked} already exists.`, [
        { field: 'propertyname', message: 'is already taken (names are compared case-insensitively)' },
      ]);
    }
    throw error;
  }
}

/** POST /contacts/properties: the property, created in the request's transaction (http/idempotency.ts). */
export const postProperty = postProcedure(
  import.meta.url,
  'postProperty',
  async ({ db }, args: { accountId: string; name: string; now: number }) => ({
    statusCode: 201,
    body: await createProperty(db, { now: () => args.now }, args.accountId, args.name),
  }),
);

export async function listProperties(db: Db, accountId: string): Promise<PropertyView[]> {
  const rows = await db
    .selectFrom('contact_properties')
    .selectAll()
    .where('account_id', '=', accountId)
    .orderBy('created_at')
    .orderBy('id')
    .execute();
  return rows.map(propertyView);
}
