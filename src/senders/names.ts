import type { Kysely } from 'kysely';
import type { Clock } from '../clock.ts';
import { isUniqueViolation } from '../db/errors.ts';
import type { Schema } from '../db/schema.ts';
import { badRequest, conflict, notFound } from '../errors.ts';
import { findAccountById } from '../accounts/service.ts';
import { recordAudit, type AuditBy } from '../audit/entries.ts';

/**
 * An account's SMS sender names (senderName of /sms/single and /sms/batch): registered by the
 * operator once verified, and the rule for their form, which a send's request is held to too.
 */

type Db = Kysely<Schema>;

/**
 * Alphanumeric sender IDs are at most 11 characters (GSM 03.40 TP-OA);
 * numeric ones (a long code or short code) at most 15 digits (E.164).
 */
export function isValidSenderName(name: string): boolean {
  return /^(?=.*[A-Za-z])[A-Za-z0-9 ]{1,11}$/.test(name) || /^\d{3,15}$/.test(name);
}

/**
 * Registers the name for the account, with its audit entry (`by`: the operator) when it is new
 * to it. A numeric `defaultSenderName` is every account's (replies to it go to the account that
 * last sent to the handset, sms/inbound.ts): it is no one account's to hold (409).
 */
export async function addSenderName(
  db: Db,
  clock: Clock,
  args: { accountId: string; name: string; by: AuditBy; defaultSenderName: string },
): Promise<{ name: string; createdAt: string }> {
  const { accountId, name, by } = args;
  if (!isValidSenderName(name)) {
    throw badRequest(
      'A sender name is 1 to 11 letters, digits or spaces with at least one letter, or 3 to 15 digits.',
      [{ field: 'name', message: 'must be an alphanumeric sender ID (≤ 11) or a number (≤ 15 digits)' }],
    );
  }
  if (/^\d+$/.test(name) && name === args.defaultSenderName) {
    const why = 'every account sends from it, and a reply to it goes to the account that last sent to the handset.';
    throw conflict(`${name} is the service's default sender name (DEFAULT_SENDER_NAME): ${why}`, [
      { field: 'name', message: "is the service's default sender name" },
    ]);
  }
  if (/^\d+$/.test(name)) {
    // A numeric name routes replies to its account (sms/inbound.ts): one account holds it at most.
    const holder = await db
      .selectFrom('sender_names')
      .select('account_id')
      .where('name', '=', name)
      .where('account_id', '<>', accountId)
      .executeTakeFirst();
    if (holder) throw numericNameTaken(name);
  }
  try {
    return await insertSenderName(db, clock, { accountId, name, by });
  } catch (error) {
    // Another account registered it since the check (sender_names_numeric).
    if (isUniqueViolation(error)) throw numericNameTaken(name);
    throw error;
  }
}

const numericNameTaken = (name: string) => {
  const why = 'replies to it are routed to that account, so it cannot be shared.';
  return conflict(`Another account holds the sender number ${name}: ${why}`, [
    { field: 'name', message: 'is a numeric sender name another account holds' },
  ]);
};

async function insertSenderName(
  db: Db,
  clock: Clock,
  { accountId, name, by }: { accountId: string; name: string; by: AuditBy },
): Promise<{ name: string; createdAt: string }> {
  if (!(await findAccountById(db, accountId))) throw notFound('The account');
  const now = clock.now();
  await db.transaction().execute(async (trx) => {
    const inserted = await trx
      .insertInto('sender_names')
      .values({ account_id: accountId, name, created_at: now })
      .onConflict((oc) => oc.columns(['account_id', 'name']).doNothing())
      .executeTakeFirst();
    if (Number(inserted.numInsertedOrUpdatedRows ?? 0) > 0)
      await recordAudit(trx, { ...by, accountId, action: 'senderName.added', target: name });
  });
  return { name, createdAt: new Date(now).toISOString() };
}

export async function listSenderNames(db: Db, accountId: string): Promise<string[]> {
  const rows = await db
    .selectFrom('sender_names')
    .select('name')
    .where('account_id', '=', accountId)
    .orderBy('name')
    .execute();
  return rows.map((r) => r.name);
}
