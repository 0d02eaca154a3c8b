import type { Kysely } from 'kysely';
import { lockAccountContacts } from '../crm/queries.ts';
import type { DialectName } from '../db/dialect.ts';
import type { Schema } from '../db/schema.ts';
import { notFound } from '../errors.ts';
import { cursorCodec } from '../http/cursor.ts';
import { erasedAddress } from './erased-identifiers.ts';
import type { Channel } from './recipients.ts';
import { recordAudit, type AuditBy } from '../audit/entries.ts';

type Db = Kysely<Schema>;

export interface SuppressionView {
  address: string;
  reason: string;
  createdAt: string;
}

const view = (row: { address: string; reason: string; created_at: number }): SuppressionView => ({
  address: row.address,
  reason: row.reason,
  createdAt: new Date(row.created_at).toISOString(),
});

interface NewSuppression {
  accountId: string;
  channel: Channel;
  address: string;
  reason: string;
  now: number;
}

/** Suppresses an address for the account on a channel; suppressing it again keeps the first record. */
export async function addSuppression(db: Db, input: NewSuppression): Promise<SuppressionView> {
  await insertSuppression(db, input);
  return readSuppression(db, input);
}

/**
 * POST /sms/suppressions and /email/suppressions: the suppression and, if it is new, its audit
 * entry, in one transaction; the entry's target is the address's keyed hash (erased-identifiers.ts),
 * never the address, so an erasure of the person leaves nothing of them in the log.
 */
export async function suppressByRequest(
  db: Db,
  input: NewSuppression,
  by: AuditBy,
  erasureKey: Buffer,
): Promise<SuppressionView> {
  return db.transaction().execute(async (trx) => {
    if (await insertSuppression(trx, input)) {
      const target = erasedAddress(erasureKey, input.address);
      await recordAudit(trx, { ...by, accountId: input.accountId, action: 'suppression.added', target });
    }
    return readSuppression(trx, input);
  });
}

/** True if the address was not suppressed yet. */
async function insertSuppression(db: Db, input: NewSuppression): Promise<boolean> {
  const result = await db
    .insertInto('suppressions')
    .values({
      account_id: input.accountId,
      channel: input.channel,
      address: input.address,
      reason: input.reason,
      created_at: input.now,
    })
    .onConflict((oc) => oc.columns(['account_id', 'channel', 'address']).doNothing())
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0) > 0;
}

async function readSuppression(db: Db, input: NewSuppression): Promise<SuppressionView> {
  const row = await db
    .selectFrom('suppressions')
    .select(['address', 'reason', 'created_at'])
    .where('account_id', '=', input.accountId)
    .where('channel', '=', input.channel)
    .where('address', '=', input.address)
    .executeTakeFirstOrThrow();
  return view(row);
}

/**
 * The person at an address wants no more email from the account (an unsubscribe, a spam
 * complaint): every contact of the account with it loses emailOptIn, and it is suppressed
 * with the reason, so neither a list nor a batch's own recipients reach it again.
 */
export async function optOutEmail(
  db: Db,
  dialect: DialectName,
  input: { accountId: string; address: string; reason: string; now: number },
): Promise<void> {
  // A contact batch being applied holds the account's contacts (crm/apply.ts) and writes back
  // every opt-in it read: the opt-out waits for it, not the other way round.
  await lockAccountContacts(db, dialect, input.accountId);
  await db
    .updateTable('contacts')
    .set({ email_opt_in: false, updated_at: input.now })
    .where('account_id', '=', input.accountId)
    .where('email', '=', input.address)
    .execute();
  await addSuppression(db, { ...input, channel: 'email' });
}

/**
 * The address may be sent to again: its suppression goes, or an erased person's suppression of
 * it (found by its keyed hash, erased-identifiers.ts), so the person can ask to hear again.
 */
export async function removeSuppression(
  db: Db,
  accountId: string,
  channel: Channel,
  address: string,
  erasureKey: Buffer,
  by: AuditBy,
): Promise<void> {
  const hash = erasedAddress(erasureKey, address);
  await db.transaction().execute(async (trx) => {
    const result = await trx
      .deleteFrom('suppressions')
      .where('account_id', '=', accountId)
      .where('channel', '=', channel)
      .where('address', '=', address)
      .executeTakeFirst();
    if (Number(result.numDeletedRows) === 0) {
      const erased = await trx
        .deleteFrom('erased_suppressions')
        .where('account_id', '=', accountId)
        .where('channel', '=', channel)
        .where('hash', '=', hash)
        .executeTakeFirst();
      if (Number(erased.numDeletedRows) === 0) throw notFound('The suppression');
    }
    // The address's keyed hash, as for an erased person's suppression: never the address.
    await recordAudit(trx, { ...by, accountId, action: 'suppression.removed', target: hash });
  });
}

// Pages in address order: SMS numbers are digits, email addresses hold dots.
const CURSORS = { sms: cursorCodec(['digits']), email: cursorCodec(['address']) };

/**
 * The account's suppressions on a channel, in address order, a page at a time (or the one
 * address asked for, which with `erasureKey` an erased person's suppression answers too, by the
 * address's hash: the pages never show those, whose addresses are not held).
 */
export async function listSuppressions(
  db: Db,
  accountId: string,
  channel: Channel,
  query: { address?: string; cursor?: string; limit: number; erasureKey?: Buffer },
) {
  let select = db
    .selectFrom('suppressions')
    .select(['address', 'reason', 'created_at'])
    .where('account_id', '=', accountId)
    .where('channel', '=', channel);
  if (query.address !== undefined) select = select.where('address', '=', query.address);
  const cursor = CURSORS[channel];
  if (query.cursor !== undefined) select = select.where('address', '>', cursor.decode(query.cursor)[0]);
  const rows = await select
    .orderBy('address')
    .limit(query.limit + 1)
    .execute();
  if (query.address !== undefined && query.erasureKey !== undefined && rows.length === 0) {
    const erased = await db
      .selectFrom('erased_suppressions')
      .select(['reason', 'created_at'])
      .where('account_id', '=', accountId)
      .where('channel', '=', channel)
      .where('hash', '=', erasedAddress(query.erasureKey, query.address))
      .executeTakeFirst();
    if (erased) rows.push({ address: query.address, ...erased });
  }
  const { rows: shown, nextCursor } = cursor.page(rows, query.limit, (last) => [last.address]);
  return { suppressions: shown.map(view), nextCursor };
}
