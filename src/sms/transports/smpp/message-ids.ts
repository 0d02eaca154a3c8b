import { createHash } from 'node:crypto';

/**
 * Operators' message ids as Herald keeps and matches them (ARCHITECTURE.md, "Receipts are
 * matched to submits whatever notation the SMSC writes the id in"). A submit_sm_resp id is kept
 * as written, lower case and without leading zeros. A receipt's id may be written in the other
 * notation (hex in submit_sm_resp, decimal in the receipt text, or the reverse), so it is read
 * every way it can be; the receipt's source address, the recipient, settles an id that reads
 * both ways (journal.ts matches on both).
 */

/**
 * SMPP 3.4 gives a message_id 65 octets at most. A longer one (an SMSC out of the spec, or a
 * hostile one: the package reads up to 64 KiB) is kept as its digest, which fits an index
 * (PostgreSQL's b-tree refuses an entry over 2,704 bytes) and is the same whether a submit's
 * answer or a receipt names it.
 */
const MAX_ID_LENGTH = 65;

const bounded = (id: string) =>
  id.length <= MAX_ID_LENGTH ? id : `sha256:${createHash('sha256').update(id).digest('hex')}`;

/** An id as kept: trimmed, lower case, leading zeros dropped ("0" stays). */
export function normalisedId(id: string): string {
  return bounded(
    id
      .trim()
      .toLowerCase()
      .replace(/^0+(?=.)/, ''),
  );
}

/**
 * The ids a receipt's id can stand for, the likeliest first: as written, then a decimal id
 * read as the hex that submit_sm_resp may have written, then a hex one read as decimal.
 */
export function idReadings(id: string): string[] {
  const written = normalisedId(id);
  const readings = [written];
  if (/^[0-9]+$/.test(written)) readings.push(bounded(BigInt(written).toString(16)));
  if (/^[0-9a-f]+$/.test(written)) readings.push(bounded(BigInt(`0x${written}`).toString(10)));
  return [...new Set(readings)];
}
