/**
 * The GSM 7-bit default alphabet and its extension table (3GPP TS 23.038 §6.2.1, formerly
 * GSM 03.38). Only the default tables: the national language shift tables (Turkish,
 * Portuguese, Indian scripts…) need a locking/single-shift IE in the UDH that not every
 * handset and SMSC honours, so text outside these tables goes out as UCS-2 instead.
 */

/** Escape to the extension table: an extension character is sent as ESC + its septet. */
const ESC = 0x1b;

// The 128 characters of the default alphabet in septet order; ESC (0x1B) holds a placeholder.
const DEFAULT_ALPHABET =
  '@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞ\u001bÆæßÉ !"#¤%&\'()*+,-./0123456789:;<=>?' +
  '¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà';

const EXTENSION: ReadonlyArray<readonly [string, number]> = [
  ['\f', 0x0a], ['^', 0x14], ['{', 0x28], ['}', 0x29], ['\\', 0x2f],
  ['[', 0x3c], ['~', 0x3d], [']', 0x3e], ['|', 0x40], ['€', 0x65],
];

// Both tables are indexed by UTF-16 code unit and sized to the highest GSM code point (€,
// U+20AC): one typed-array read per character on the hot path, 8 KiB each.
const TABLE_SIZE = 0x20ad;

/** Septets a code unit takes: 1 (default alphabet), 2 (ESC + extension table), 0 (none). */
const WIDTH = new Uint8Array(TABLE_SIZE);

/** A code unit's septet in its table: the extension table's where WIDTH is 2. */
const SEPTET = new Uint8Array(TABLE_SIZE);

for (let septet = 0; septet < DEFAULT_ALPHABET.length; septet++) {
  if (septet === ESC) continue;
  const code = DEFAULT_ALPHABET.charCodeAt(septet);
  WIDTH[code] = 1;
  SEPTET[code] = septet;
}
for (const [char, septet] of EXTENSION) {
  WIDTH[char.charCodeAt(0)] = 2;
  SEPTET[char.charCodeAt(0)] = septet;
}

/** Septets a UTF-16 code unit takes in GSM-7: 1, 2 (ESC + extension table) or 0 (none). */
export const septetsOf = (code: number): number => (code < TABLE_SIZE ? WIDTH[code] : 0);

/**
 * Writes text[start, end) (all GSM characters) as septets, one a byte, into `out` at
 * `offset`; returns the offset after the last one.
 */
export function writeSeptets(text: string, start: number, end: number, out: Uint8Array, offset: number): number {
  for (let i = start; i < end; i++) {
    const code = text.charCodeAt(i);
    if (WIDTH[code] === 2) out[offset++] = ESC;
    out[offset++] = SEPTET[code];
  }
  return offset;
}

/**
 * Packs septets[from, to) seven bits each, least significant bit first (TS 23.038 §6.1.2.1.1),
 * into `out` at `offset`, after `fillBits` zero bits: after a UDH the first septet starts on
 * a septet boundary of the user data (TS 23.040 §9.2.3.24). Returns the offset after the
 * last octet. The spare bits of the last octet are zero.
 */
export function packSeptets(
  septets: Uint8Array, from: number, to: number, fillBits: number, out: Uint8Array, offset: number,
): number {
  let bits = 0;
  let held = fillBits;
  for (let i = from; i < to; i++) {
    bits |= septets[i] << held;
    held += 7;
    while (held >= 8) {
      out[offset++] = bits & 0xff;
      bits >>>= 8;
      held -= 8;
    }
  }
  if (held > 0 && to > from) out[offset++] = bits;
  return offset;
}
