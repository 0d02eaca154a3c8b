import { sql } from 'kysely';
import { procedure } from '../db/procedure.ts';
import { recordAudit, type AuditBy } from '../audit/entries.ts';
import { conflict, notFound } from '../errors.ts';
import { lockAccountContacts, lockListToDelete } from '../crm/queries.ts';
import { allContactsFixed } from '../crm/setup.ts';
import { queries } from './queries.ts';
import { addSuppression } from './suppressions.ts';

/**
 * Contacts and lists deleted (ARCHITECTURE.md, "Data rights and management"). Here rather than
 * in crm/ because each answers to what this module keeps: a contact's missing consent becomes
 * a suppression, and a list stays while a send still has to expand it. Each takes the account's
 * contact lock (crm/queries.ts) first, so on PostgreSQL no batch applies, and no contact is
 * changed or joins a list, in between.
 */

/** Why a contact deleted without consent leaves its number or address suppressed. */
export const DELETED_WITHOUT_CONSENT = 'contact deleted without consent';

/**
 * DELETE /contacts/{contactId}: the contact and its memberships go; its messages stay (their
 * recipients keep its number or address, and contact_id now names no one). A number or address
 * it held without consent (opt-in false) is suppressed on its channel, so the opt-out outlives
 * the contact: a later batch or list cannot reach the number again. That holds for the account
 * as a whole, as every suppression does, even if another contact has the same number with
 * consent. An existing suppression keeps its first reason. Its audit entry is written in its
 * transaction (audit/entries.ts).
 */
export const deleteContact = procedure(
  import.meta.url,
  'deleteContact',
  async ({ db, dialect }, args: { accountId: string; contactId: number; by: AuditBy }): Promise<boolean> =>
    db.transaction().execute(async (trx) => {
      await lockAccountContacts(trx, dialect, args.accountId);
      const contact = await trx
        .selectFrom('contacts')
        .select(['mobile', 'email', 'mobile_opt_in', 'email_opt_in'])
        .where('account_id', '=', args.accountId)
        .where('id', '=', args.contactId)
        .executeTakeFirst();
      if (!contact) return false;
      // By list_members_contact (contact_id), kept to the account's lists: the same id is
      // another contact in another account.
      await trx
        .deleteFrom('list_members')
        .where('contact_id', '=', args.contactId)
        .where('list_id', 'in', (eb) =>
          eb.selectFrom('contact_lists').select('id').where('account_id', '=', args.accountId),
        )
        .execute();
      await trx
        .deleteFrom('contacts')
        .where('account_id', '=', args.accountId)
        .where('id', '=', args.contactId)
        .execute();
      const target = String(args.contactId);
      await recordAudit(trx, { ...args.by, accountId: args.accountId, action: 'contact.deleted', target });
      const suppress = { accountId: args.accountId, reason: DELETED_WITHOUT_CONSENT, now: args.by.at };
      if (contact.mobile !== null && !contact.mobile_opt_in) {
        await addSuppression(trx, { ...suppress, channel: 'sms', address: contact.mobile });
      }
      if (contact.email !== null && !contact.email_opt_in) {
        await addSuppression(trx, { ...suppress, channel: 'email', address: contact.email });
      }
      return true;
    }),
);

/**
 * DELETE /lists/{listId}: the list and its memberships go; its contacts stay. 409 while a send
 * that will expand it names it (its list_ids), and for `All contacts`. The account's sends are
 * read by sends_listing (account_id first), the unfinished ones' list_ids unpacked: a rare call,
 * and an index of unfinished sends would cost every send's status change a write.
 *
 * A contact batch still queued for the list is refused too: applied afterwards it would add
 * members to a list that is gone. Finished batches keep their records (0035). The list is
 * locked before the sends and batches are looked for, so one being written as this runs is
 * either seen or refused (crm/queries.ts, lockNamedLists).
 */
export const deleteList = procedure(
  import.meta.url,
  'deleteList',
  async ({ db, dialect }, args: { accountId: string; listId: string; by: AuditBy }): Promise<void> =>
    db.transaction().execute(async (trx) => {
      const allContacts = await lockAccountContacts(trx, dialect, args.accountId);
      const list = await lockListToDelete(trx, dialect, args.accountId, args.listId);
      if (!list) throw notFound('The list');
      if (list.id === allContacts) throw allContactsFixed('deleted');
      const send = await trx
        .selectFrom('sends as s')
        .select(['s.id', 's.channel'])
        .where('s.account_id', '=', args.accountId)
        .where((eb) =>
          eb.or([
            eb('s.status', 'in', ['Scheduled', 'Queued']),
            eb.and([eb('s.status', '=', 'Sending'), eb('s.expanded', '=', sql.lit(false))]),
          ]),
        )
        .where(queries[dialect].sendNamesList(args.listId))
        .executeTakeFirst();
      if (send) {
        const id = send.channel === 'sms' ? 'queueId' : 'batchId';
        throw conflict(`A send not yet expanded names the list (${id} ${send.id}): cancel it or let it start first.`, [
          { field: 'listId', message: `is named by the ${send.channel} send ${send.id}` },
        ]);
      }
      const batch = await trx
        .selectFrom('contact_batches')
        .select('id')
        .where('account_id', '=', args.accountId)
        .where('list_id', '=', args.listId)
        .where('status', '=', 'Queued')
        .executeTakeFirst();
      if (batch) {
        throw conflict(`A contact batch not yet applied adds to the list (batchId ${batch.id}).`, [
          { field: 'listId', message: `is named by the contact batch ${batch.id}` },
        ]);
      }
      await trx.deleteFrom('list_members').where('list_id', '=', args.listId).execute();
      await trx.deleteFrom('contact_lists').where('id', '=', args.listId).execute();
      const audited = { ...args.by, accountId: args.accountId, action: 'list.deleted' as const };
      await recordAudit(trx, { ...audited, target: args.listId });
    }),
);
