import { randomBytes } from 'node:crypto';
import type { ProcedureDatabase } from '../db/procedure.ts';
import { queries, type LinkTarget, type NewLink } from './queries.ts';

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/**
 * Every code is 8 base62 characters drawn at random: 62^8 ≈ 2.2 × 10^14 codes (47 bits), so
 * one cannot be guessed from another, and a link's length is known before its code is drawn
 * (an SMS is measured with it at acceptance).
 */
export const CODE_LENGTH = 8;

/** What a code looks like in a path; anything else is unknown without asking the database. */
export const CODE = /^[0-9A-Za-z]{1,8}$/;

// 248 = 4 × 62: bytes from 248 up are dropped, else the first eight characters would come more often.
const UNBIASED = 248;

/**
 * A random code. Never all lowercase letters: the service's own paths are lowercase words
 * (`/contacts` is eight), and on a shortener host a code that spelled one would be shadowed.
 */
export function newCode(): string {
  for (;;) {
    let code = '';
    while (code.length < CODE_LENGTH) {
      for (const byte of randomBytes(CODE_LENGTH * 2)) {
        if (byte < UNBIASED && code.length < CODE_LENGTH) code += ALPHABET[byte % ALPHABET.length];
      }
    }
    if (!/^[a-z]+$/.test(code)) return code;
  }
}

/**
 * One link per recipient id (null: a link the send's recipients share), leading to the
 * target's URL, written in one statement for them all: their codes, in the order of
 * `recipientIds`. A code already taken is drawn again for its recipient alone (at ten
 * million links, one draw in twenty million collides).
 */
async function issueLinks(
  database: ProcedureDatabase,
  target: LinkTarget,
  recipientIds: Array<number | null>,
): Promise<string[]> {
  const codes = new Array<string>(recipientIds.length);
  let pending = recipientIds.map((_, i) => i);
  while (pending.length > 0) {
    const drawn = new Map<string, number>();
    for (const i of pending) {
      let code = newCode();
      while (drawn.has(code)) code = newCode();
      drawn.set(code, i);
    }
    const links = [...drawn].map(([code, i]) => ({ code, recipientId: recipientIds[i] }));
    const written = new Set(await insertLinks(database, target, links));
    for (const [code, i] of drawn) if (written.has(code)) codes[i] = code;
    pending = [...drawn].filter(([code]) => !written.has(code)).map(([, i]) => i);
  }
  return codes;
}

/**
 * Each recipient's own link to the target's URL, in the order of `recipientIds`: the one made
 * for it before, else a new one. A message tried again (refused for now, or its worker killed)
 * carries the code it carried then: parts an SMSC took from the first try are joined on the
 * handset with parts of the next, which must hold the same text.
 */
export async function recipientLinks(
  database: ProcedureDatabase,
  target: LinkTarget,
  recipientIds: number[],
): Promise<string[]> {
  const { rows } = await queries[database.dialect].recipientCodes(target, recipientIds).execute(database.db);
  // The earliest, should a recipient have several (its tries made a link each).
  const made = new Map(rows.map((row) => [Number(row.recipient_id), row.code]));
  const missing = recipientIds.filter((id) => !made.has(id));
  const issued = missing.length > 0 ? await issueLinks(database, target, missing) : [];
  for (const [i, id] of missing.entries()) made.set(id, issued[i]);
  return recipientIds.map((id) => made.get(id)!);
}

/** The send's shared link to the target's URL, made the first time it is asked for. */
export async function sharedLink(database: ProcedureDatabase, target: LinkTarget): Promise<string> {
  const row = await database.db
    .selectFrom('links')
    .select('code')
    .where('send_id', '=', target.sendId)
    .where('recipient_id', 'is', null)
    .where('url', '=', target.url)
    .executeTakeFirst();
  return row?.code ?? (await issueLinks(database, target, [null]))[0];
}

/** Inserts links; answers the codes written (a code taken is skipped, not an error). */
async function insertLinks(database: ProcedureDatabase, target: LinkTarget, links: NewLink[]): Promise<string[]> {
  const { rows } = await queries[database.dialect].insertLinks(target, JSON.stringify(links)).execute(database.db);
  return rows.map((row) => row.code);
}
