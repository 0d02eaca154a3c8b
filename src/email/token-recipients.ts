import type { Database } from '../db/database.ts';
import { REUSES_ROW_IDS } from '../db/dialect.ts';
import { procedure } from '../db/procedure.ts';
import type { Keyring } from '../sealed.ts';
import type { TokenRecipient } from './tracking.ts';
import { type ReadToken, signedBy } from './tracking-tokens.ts';

/**
 * The send of email recipient `recipientId`, and whether a token of form 0 (tracking-tokens.ts),
 * which signs the row id alone, may name it: on PostgreSQL, where an id names one row for good,
 * always; on SQLite, which gives a deleted row's id again, only a row written before tokens
 * signed their send (`bound_tokens` false, 0042). Undefined when there is no such recipient.
 */
export const tokenRecipientRow = procedure(
  import.meta.url,
  'tokenRecipientRow',
  async (
    { db, dialect },
    args: { recipientId: number },
  ): Promise<{ sendId: string; unboundNames: boolean } | undefined> => {
    const row = await db
      .selectFrom('send_recipients as r')
      .innerJoin('sends as s', 's.id', 'r.send_id')
      .select(['s.id', 'r.bound_tokens'])
      .where('r.id', '=', args.recipientId)
      .where('s.channel', '=', 'email')
      .executeTakeFirst();
    if (!row) return undefined;
    return { sendId: row.id, unboundNames: !REUSES_ROW_IDS[dialect] || !row.bound_tokens };
  },
);

/**
 * The recipient a token names, once checked against that row: signed by a key of the ring (a
 * message sent before ENCRYPTION_KEY was replaced still tracks) for the row's send. Null for a
 * token that names no email recipient, was forged or altered, or was made for a recipient whose
 * id SQLite has since given another.
 */
export async function recipientNamedBy(
  database: Database,
  keys: Keyring,
  token: ReadToken,
): Promise<TokenRecipient | null> {
  const row = await database.call(tokenRecipientRow, { recipientId: token.recipientId });
  if (!row || (!token.bound && !row.unboundNames)) return null;
  if (!keys.all.some((key) => signedBy(key, token, row.sendId))) return null;
  return { recipientId: token.recipientId, sendId: row.sendId };
}
