import { procedure } from '../db/procedure.ts';
import { inJson } from '../db/in-json.ts';
import { conflict, notFound, unprocessable } from '../errors.ts';
import { postProcedure } from '../http/idempotency.ts';
import { applyBatch } from './apply.ts';
import { unpackEntries, type BatchJob } from './batches.ts';
import { addListMembers, lockAccountContacts } from './queries.ts';
import { renameListRow, requireList } from './setup.ts';

/**
 * Contacts and lists changed one at a time (ARCHITECTURE.md, "Data rights and management"):
 * the procedures behind PATCH /contacts/{contactId}, PATCH /lists/{listId} and a list's members.
 * Each takes the account's contact lock first (lockAccountContacts), as a batch does: on
 * PostgreSQL a contact checked here cannot be deleted, or a batch applied, before it commits.
 * Deleting contacts and lists is messaging/deletions.ts's: it answers to sends and suppressions.
 */

export interface PatchContact {
  accountId: string;
  contactId: number;
  /** The contact's one entry, checked and with its properties resolved by the batch's own steps. */
  job: BatchJob;
  now: number;
}

/**
 * PATCH /contacts/{contactId}: the entry applied exactly as a batch applies one that names a
 * contactId, in one transaction; a contact the account does not have is 404 (a batch would
 * create it). Answers whether it existed.
 */
export const patchContact = procedure(
  import.meta.url,
  'patchContact',
  async ({ db, dialect }, args: PatchContact): Promise<'not found' | 'applied'> =>
    db.transaction().execute(async (trx) => {
      await lockAccountContacts(trx, dialect, args.accountId);
      const found = await trx
        .selectFrom('contacts')
        .select('id')
        .where('account_id', '=', args.accountId)
        .where('id', '=', args.contactId)
        .executeTakeFirst();
      if (!found) return 'not found';
      await applyBatch(
        trx,
        dialect,
        args.now,
        { accountId: args.accountId, listId: args.job.listId },
        unpackEntries(args.job),
      );
      return 'applied';
    }),
);

/** PATCH /lists/{listId}: a new name, by the rules of POST /lists; `All contacts` keeps its own. */
export const renameList = procedure(
  import.meta.url,
  'renameList',
  async ({ db }, args: { accountId: string; listId: string; name: string }) =>
    db.transaction().execute(async (trx) => renameListRow(trx, args.accountId, args.listId, args.name)),
);

export interface AddMembers {
  accountId: string;
  listId: string;
  contactIds: number[];
  now: number;
}

/**
 * POST /lists/{listId}/contacts: existing contacts of the account join the list. Every id is
 * checked first: one the account does not have is 422, named by its place, and nothing is added.
 * `All contacts` holds every contact already: nothing to write.
 */
export const postListMembers = postProcedure(
  import.meta.url,
  'postListMembers',
  async ({ db, dialect }, args: AddMembers) => {
    const allContacts = await lockAccountContacts(db, dialect, args.accountId);
    await requireList(db, args.accountId, args.listId);
    const ids = [...new Set(args.contactIds)];
    const known = new Set(
      (
        await db
          .selectFrom('contacts')
          .select('id')
          .where('account_id', '=', args.accountId)
          .where('id', 'in', inJson(dialect, ids, 'bigint'))
          .execute()
      ).map((row) => Number(row.id)),
    );
    const unknown = args.contactIds.flatMap((id, i) =>
      known.has(id) ? [] : [{ field: `contactIds[${i}]`, message: `${id} is not a contact of this account` }],
    );
    if (unknown.length > 0) {
      throw unprocessable(
        `${unknown.length} of the contacts ${unknown.length === 1 ? 'is' : 'are'} not the account's; none was added.`,
        unknown,
      );
    }
    let added = 0;
    if (args.listId !== allContacts) {
      const members = new Set(
        (
          await db
            .selectFrom('list_members')
            .select('contact_id')
            .where('list_id', '=', args.listId)
            .where('contact_id', 'in', inJson(dialect, ids, 'bigint'))
            .execute()
        ).map((row) => Number(row.contact_id)),
      );
      const joining = ids.filter((id) => !members.has(id));
      await addListMembers(
        db,
        dialect,
        args.now,
        joining.map((contactId) => ({ listId: args.listId, contactId })),
      );
      added = joining.length;
    }
    return { statusCode: 200, body: { listId: args.listId, added } };
  },
);

/**
 * DELETE /lists/{listId}/contacts/{contactId}: the contact leaves the list, and stays. 404 when
 * it is not a member (or the list is not the account's); `All contacts` is every contact by
 * definition, so no one leaves it but by being deleted: 409.
 */
export const removeListMember = procedure(
  import.meta.url,
  'removeListMember',
  async ({ db, dialect }, args: { accountId: string; listId: string; contactId: number }) =>
    db.transaction().execute(async (trx) => {
      const allContacts = await lockAccountContacts(trx, dialect, args.accountId);
      await requireList(trx, args.accountId, args.listId);
      if (args.listId === allContacts) {
        throw conflict('`All contacts` holds every contact of the account: delete the contact to take it off.');
      }
      const result = await trx
        .deleteFrom('list_members')
        .where('list_id', '=', args.listId)
        .where('contact_id', '=', args.contactId)
        .executeTakeFirst();
      if (Number(result.numDeletedRows) === 0) throw notFound('The contact in this list');
    }),
);
