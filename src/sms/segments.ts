/**
 * SMS segmentation: which encoding a text needs, how many parts it takes, and each part's
 * bytes for SMPP's `short_message`. Pure: no I/O, no clock, no randomness. The caller
 * segments the rendered text (tags substituted), since a substituted value can change the
 * encoding and the part count.
 *
 * Each part's user data is 140 octets (TS 23.040 §9.2.3.24): 160 septets of GSM-7 or 70
 * UTF-16 code units of UCS-2. A longer text is split into parts that each start with a
 * 6-octet concatenation UDH (IEI 0x00, 8-bit reference), leaving 134 octets: 153 septets
 * (134 × 8 / 7, rounded down) or 67 code units. An extension character (ESC + septet) and a
 * surrogate pair are never split across parts.
 */
import { packSeptets, septetsOf, writeSeptets } from './gsm7.ts';

export type Encoding = 'GSM-7' | 'UCS-2';

/** A text that holds nothing to read: neither a request's body nor a recipient's text, tags filled, may be. */
export const isBlank = (text: string): boolean => text.trim() === '';

export interface Measure {
  encoding: Encoding;
  /** Septets (an extension character counts two) or UTF-16 code units of the whole text. */
  units: number;
  parts: number;
}

export interface Part {
  /** This part's share of the text; the parts' texts joined are the text. */
  text: string;
  /** Septets or code units of this part's text (for packed GSM-7, the septet count an octet count cannot give). */
  units: number;
  /** `05 00 03 reference total sequence`, or empty when the text fits one part. */
  udh: Uint8Array;
  /**
   * GSM-7: one septet a byte (ESC 0x1B before an extension character), or packed 7-bit when
   * asked, after one fill bit when there is a UDH. UCS-2: big-endian code units.
   */
  payload: Uint8Array;
  /** `udh` then `payload`, contiguous: SMPP's short_message (set esm_class UDHI when udh is not empty). */
  shortMessage: Uint8Array;
}

export interface Segmented {
  encoding: Encoding;
  units: number;
  parts: Part[];
}

export interface SegmentOptions {
  /**
   * Concatenation reference, 0–255, from the caller: it must be the same when a part is sent
   * again (a retry after a crash) and differ between messages in flight to one handset, which
   * only the caller can arrange (e.g. the recipient row's id modulo 256).
   */
  reference: number;
  /** Pack GSM-7 septets seven bits each instead of one a byte; ignored for UCS-2. Default false. */
  packed?: boolean;
}

const GSM_SINGLE = 160;
const GSM_CONCATENATED = 153;
const UCS2_SINGLE = 70;
const UCS2_CONCATENATED = 67;
const UDH_LENGTH = 6;
/** Bits that bring the 48 UDH bits to the next septet boundary (49). */
const UDH_FILL_BITS = 7 - ((UDH_LENGTH * 8) % 7);
/** An 8-bit reference's UDH numbers at most 255 parts. */
export const MAX_PARTS = 255;

// A part's septets before packing; a part never holds more than GSM_SINGLE.
const unpacked = new Uint8Array(GSM_SINGLE);

// Where the text last measured splits: part k is text[ends[k - 1], ends[k]), the first from 0.
// The module is synchronous, so one array serves every call and the hot path allocates none.
// Past MAX_PARTS, parts are still counted; their ends fall outside and are dropped.
const ends = new Int32Array(MAX_PARTS);

/** Encoding, units and parts of `text`, in one pass over a GSM-7 text (and none over UCS-2). */
export function measure(text: string): Measure {
  let septets = 0;
  let parts = 0;
  let fill = 0;
  for (let i = 0; i < text.length; i++) {
    const width = septetsOf(text.charCodeAt(i));
    if (width === 0) return measureUcs2(text);
    if (fill + width > GSM_CONCATENATED) {
      ends[parts++] = i;
      fill = 0;
    }
    fill += width;
    septets += width;
  }
  if (septets <= GSM_SINGLE) parts = 0;
  ends[parts++] = text.length;
  return { encoding: 'GSM-7', units: septets, parts };
}

function measureUcs2(text: string): Measure {
  if (text.length <= UCS2_SINGLE) {
    ends[0] = text.length;
    return { encoding: 'UCS-2', units: text.length, parts: 1 };
  }
  let parts = 0;
  for (let start = 0; start < text.length; parts++) {
    start = ucs2PartEnd(text, start);
    ends[parts] = start;
  }
  return { encoding: 'UCS-2', units: text.length, parts };
}

export function segment(text: string, { reference, packed = false }: SegmentOptions): Segmented {
  if (!Number.isInteger(reference) || reference < 0 || reference > 255) {
    throw new RangeError(`the concatenation reference must be an integer from 0 to 255, not ${reference}`);
  }
  const { encoding, units, parts: count } = measure(text);
  if (count > MAX_PARTS)
    throw new RangeError(`the text takes ${count} SMS parts, more than the ${MAX_PARTS} a message can have`);
  const gsm = encoding === 'GSM-7';
  const udhLength = count > 1 ? UDH_LENGTH : 0;
  // Every part's UDH and payload in one buffer; unpacked GSM-7 is the largest form. A slice of
  // Node's pool: a typed array of its own costs ~0.4 µs here, more than encoding 160
  // characters. Only bytes written below are ever exposed (the parts are views up to `offset`).
  const out: Uint8Array = Buffer.allocUnsafe(count * udhLength + (gsm ? units : 2 * text.length));
  const parts: Part[] = [];
  let offset = 0;
  for (let sequence = 1, start = 0; sequence <= count; sequence++) {
    const end = ends[sequence - 1];
    const partStart = offset;
    if (udhLength > 0) {
      out[offset++] = 0x05; // UDHL: the octets that follow
      out[offset++] = 0x00; // IEI: concatenated short messages, 8-bit reference
      out[offset++] = 0x03; // IEDL
      out[offset++] = reference;
      out[offset++] = count;
      out[offset++] = sequence;
    }
    const payloadStart = offset;
    let partUnits: number;
    if (!gsm) {
      offset = writeUcs2(text, start, end, out, offset);
      partUnits = end - start;
    } else if (packed) {
      partUnits = writeSeptets(text, start, end, unpacked, 0);
      offset = packSeptets(unpacked, 0, partUnits, udhLength > 0 ? UDH_FILL_BITS : 0, out, offset);
    } else {
      offset = writeSeptets(text, start, end, out, offset);
      partUnits = offset - payloadStart;
    }
    parts.push({
      text: text.slice(start, end),
      units: partUnits,
      udh: out.subarray(partStart, payloadStart),
      payload: out.subarray(payloadStart, offset),
      shortMessage: out.subarray(partStart, offset),
    });
    start = end;
  }
  return { encoding, units, parts };
}

/** Where a UCS-2 part from `start` ends: after 67 code units, or 66 where the cut would part a surrogate pair. */
function ucs2PartEnd(text: string, start: number): number {
  const end = start + UCS2_CONCATENATED;
  if (end >= text.length) return text.length;
  return isHighSurrogate(text.charCodeAt(end - 1)) && isLowSurrogate(text.charCodeAt(end)) ? end - 1 : end;
}

const isHighSurrogate = (unit: number) => unit >= 0xd800 && unit <= 0xdbff;
const isLowSurrogate = (unit: number) => unit >= 0xdc00 && unit <= 0xdfff;

function writeUcs2(text: string, start: number, end: number, out: Uint8Array, offset: number): number {
  for (let i = start; i < end; i++) {
    const unit = text.charCodeAt(i);
    out[offset++] = unit >>> 8;
    out[offset++] = unit & 0xff;
  }
  return offset;
}
