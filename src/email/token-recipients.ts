import type { Database } from '../db/database.ts';
import { procedure } from '../db/procedure.ts';
import type { Keyring } from '../sealed.ts';
import type { TokenRecipient } from './tracking.ts';
import { type ReadToken, signedBy } from './tracking-tokens.ts';

/**
 * The settings row (0042) holding when tokens began to sign their recipient's send, epoch ms:
 * a token of form 0 (tracking-tokens.ts) names a recipient of a send accepted before then only.
 */
export const BOUND_TOKENS_SINCE = 'tracking_tokens_bound_since';

/**
 * The send of email recipient `recipientId`, and whether a token of form 0 may name it (its
 * send was accepted before tokens signed sends); undefined when there is no such recipient.
 */
export const tokenRecipientRow = procedure(
  import.meta.url,
  'tokenRecipientRow',
  async ({ db }, args: { recipientId: number }): Promise<{ sendId: string; unboundNames: boolean } | undefined> => {
    const row = await db
      .selectFrom('send_recipients as r')
      .innerJoin('sends as s', 's.id', 'r.send_id')
      .select((eb) => [
        's.id',
        's.created_at',
        eb.selectFrom('settings').select('value').where('key', '=', BOUND_TOKENS_SINCE).as('bound_since'),
      ])
      .where('r.id', '=', args.recipientId)
      .where('s.channel', '=', 'email')
      .executeTakeFirst();
    if (!row) return undefined;
    return {
      sendId: row.id,
      unboundNames: row.bound_since != null && Number(row.created_at) < Number(row.bound_since),
    };
  },
);

/**
 * The recipient a token names, once checked against that row: signed by a key of the ring (a
 * message sent before ENCRYPTION_KEY was replaced still tracks) for the row's send. `gone` when
 * no email recipient has the id (its message deleted, or the token forged: the two look alike);
 * `unsigned` when the row is there and the token is not its (forged, altered, or made for a
 * recipient the id of SQLite's named before).
 */
export async function checkToken(
  database: Database,
  keys: Keyring,
  token: ReadToken,
): Promise<TokenRecipient | 'gone' | 'unsigned'> {
  const row = await database.call(tokenRecipientRow, { recipientId: token.recipientId });
  if (!row) return 'gone';
  if (!token.bound && !row.unboundNames) return 'unsigned';
  if (!keys.all.some((key) => signedBy(key, token, row.sendId))) return 'unsigned';
  return { recipientId: token.recipientId, sendId: row.sendId };
}

/** The recipient a token names, checked (checkToken); null when it names none. */
export async function recipientNamedBy(
  database: Database,
  keys: Keyring,
  token: ReadToken,
): Promise<TokenRecipient | null> {
  const checked = await checkToken(database, keys, token);
  return typeof checked === 'string' ? null : checked;
}
