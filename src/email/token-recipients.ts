import type { Kysely } from 'kysely';
import type { Database } from '../db/database.ts';
import { type DialectName, REUSES_ROW_IDS } from '../db/dialect.ts';
import { procedure } from '../db/procedure.ts';
import type { Schema } from '../db/schema.ts';
import type { Keyring } from '../sealed.ts';
import type { TokenRecipient } from './tracking.ts';
import { type ReadToken, signedBy } from './tracking-tokens.ts';

/**
 * The settings row holding when this database was first served by a version whose tokens sign
 * their recipient's send (epoch ms). On SQLite, which gives a row id again, a token of form 0
 * (tracking-tokens.ts) names a recipient of a send accepted before then only: every token made
 * since is of the new form. On PostgreSQL an id names one row for good, so a token of form 0
 * still names its own.
 */
export const BOUND_TOKENS_SINCE = 'tracking_tokens_bound_since';

/** Keeps the first start's time (server.ts's createContext), where row ids are given again. */
export async function recordBoundTokensSince(db: Kysely<Schema>, dialect: DialectName, now: number): Promise<void> {
  if (!REUSES_ROW_IDS[dialect]) return;
  await db
    .insertInto('settings')
    .values({ key: BOUND_TOKENS_SINCE, value: String(now) })
    .onConflict((oc) => oc.column('key').doNothing())
    .execute();
}

/**
 * The send of email recipient `recipientId`, and whether a token of form 0 may name it;
 * undefined when there is no such recipient.
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
      .select((eb) => [
        's.id',
        's.created_at',
        eb.selectFrom('settings').select('value').where('key', '=', BOUND_TOKENS_SINCE).as('bound_since'),
      ])
      .where('r.id', '=', args.recipientId)
      .where('s.channel', '=', 'email')
      .executeTakeFirst();
    if (!row) return undefined;
    const sentBefore = row.bound_since != null && Number(row.created_at) < Number(row.bound_since);
    return { sendId: row.id, unboundNames: !REUSES_ROW_IDS[dialect] || sentBefore };
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
