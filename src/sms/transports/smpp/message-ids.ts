/**
 * Operators' message ids as Herald keeps and matches them (ARCHITECTURE.md, "Receipts are
 * matched to submits whatever notation the SMSC writes the id in"). A submit_sm_resp id is kept
 * as written, lower case and without leading zeros. A receipt's id may be written in the other
 * notation (hex in submit_sm_resp, decimal in the receipt text, or the reverse), so it is read
 * every way it can be; the receipt's source address, the recipient, settles an id that reads
 * both ways (journal.ts matches on both).
 */

/** An id as kept: trimmed, lower case, leading zeros dropped ("0" stays). */
export function normalisedId(id: string): string {
  return id
    .trim()
    .toLowerCase()
    .replace(/^0+(?=.)/, '');
}

/**
 * The ids a receipt's id can stand for, the likeliest first: as written, then a decimal id
 * read as the hex that submit_sm_resp may have written, then a hex one read as decimal.
 */
export function idReadings(id: string): string[] {
  const written = normalisedId(id);
  const readings = [written];
  if (/^[0-9]+$/.test(written)) readings.push(BigInt(written).toString(16));
  if (/^[0-9a-f]+$/.test(written)) readings.push(BigInt(`0x${written}`).toString(10));
  return [...new Set(readings)];
}
