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
  ['\f', 0x0a],
  ['^', 0x14],
  ['{', 0x28],
  ['}', 0x29],
  ['\\', 0x2f],
  ['[', 0x3c],
  ['~', 0x3d],
  [']', 0x3e],
  ['|', 0x40],
  ['€', 0x65],
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
  septets: Uint8Array,
  from: number,
  to: number,
  fillBits: number,
  out: Uint8Array,
  offset: number,
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

// Decoding: the character of each septet, default alphabet and extension table.
const EXTENSION_BY_SEPTET: string[] = [];
for (const [char, septet] of EXTENSION) EXTENSION_BY_SEPTET[septet] = char;

/**
 * The text of septets[start, end), one a byte as SMPP's unpacked GSM-7 carries them. ESC
 * before a septet the extension table lacks shows the default alphabet's character, as
 * TS 23.038 §6.2.1.1 asks of a handset; a byte above 0x7F (no septet) shows U+FFFD.
 */
export function readSeptets(septets: Uint8Array, start: number, end: number): string {
  let text = '';
  for (let i = start; i < end; i++) {
    let septet = septets[i];
    if (septet === ESC && i + 1 < end) {
      septet = septets[++i];
      const extension = EXTENSION_BY_SEPTET[septet];
      if (extension !== undefined) {
        text += extension;
        continue;
      }
    } else if (septet === ESC) {
      continue;
    }
    text += septet < 0x80 ? DEFAULT_ALPHABET[septet] : '\ufffd';
  }
  return text;
}

/**
 * The septets packed in `octets` from bit 0, the inverse of packSeptets: every whole septet
 * the octets hold. When they hold one more septet than was packed (7 spare bits), that last
 * one is the packer's zero padding or the CR that TS 23.038 §6.1.2.3.1 puts there instead,
 * so a trailing '@' or CR at exactly that length cannot be told from padding and is dropped.
 */
export function unpackSeptets(octets: Uint8Array): Uint8Array {
  let count = Math.floor((octets.length * 8) / 7);
  const septets = new Uint8Array(count);
  let bits = 0;
  let held = 0;
  let index = 0;
  for (let i = 0; i < octets.length; i++) {
    bits |= octets[i] << held;
    held += 8;
    while (held >= 7 && index < count) {
      septets[index++] = bits & 0x7f;
      bits >>>= 7;
      held -= 7;
    }
  }
  if (octets.length % 7 === 0 && count > 0 && (septets[count - 1] === 0 || septets[count - 1] === 0x0d)) count--;
  return septets.subarray(0, count);
}
