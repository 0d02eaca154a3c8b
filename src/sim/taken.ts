/**
 * What the simulator took: every accepted submit_sm kept as sent (bytes, addresses, coding),
 * decoded only when read, so the submit path does no text work. Reads put the parts of a
 * concatenated message back together by their reference.
 */
import { readSeptets, unpackSeptets } from '../sms/gsm7.ts';
import type { Address } from './pdu.ts';

export interface TakenPart {
  messageId: string;
  systemId: string;
  source: Address;
  destination: Address;
  esmClass: number;
  dataCoding: number;
  registeredDelivery: number;
  /** short_message (or message_payload) as sent, UDH included; a copy of its own. */
  shortMessage: Buffer;
  sar: Concatenation | undefined;
  receivedAt: number;
  /** The final receipt state the simulator chose for this part. */
  outcome: string;
}

export interface Concatenation {
  reference: number;
  total: number;
  sequence: number;
}

const UDH_INDICATOR = 0x40;

/** The UDH (with its length octet) and the user data after it; empty UDH without the indicator. */
export function splitUdh(part: Pick<TakenPart, 'esmClass' | 'shortMessage'>): { udh: Buffer; payload: Buffer } {
  const bytes = part.shortMessage;
  if (!(part.esmClass & UDH_INDICATOR) || bytes.length === 0) return { udh: bytes.subarray(0, 0), payload: bytes };
  const end = Math.min(bytes.length, bytes[0] + 1);
  return { udh: bytes.subarray(0, end), payload: bytes.subarray(end) };
}

/** The concatenation information element of a UDH (TS 23.040 §9.2.3.24.1 and .8: 8- and 16-bit references). */
export function concatenationOf(udh: Buffer): Concatenation | undefined {
  for (let offset = 1; offset + 1 < udh.length; offset += 2 + udh[offset + 1]) {
    const iei = udh[offset];
    const length = udh[offset + 1];
    if (iei === 0x00 && length === 3 && offset + 5 <= udh.length) {
      return { reference: udh[offset + 2], total: udh[offset + 3], sequence: udh[offset + 4] };
    }
    if (iei === 0x08 && length === 4 && offset + 6 <= udh.length) {
      return { reference: udh.readUInt16BE(offset + 2), total: udh[offset + 4], sequence: udh[offset + 5] };
    }
  }
  return undefined;
}

/**
 * The text of one part by its data_coding (SMPP 3.4 §5.2.19), or null for binary codings.
 * GSM-7 (0, the SMSC default, and the 0xF0–0xF3 message-class codings) is one septet a byte
 * unless `gsm7Packed`; packed septets run from the first bit of short_message with the UDH
 * taking whole septets, its last one padded with fill bits (TS 23.040 §9.2.3.24).
 */
export function decodePart(
  part: Pick<TakenPart, 'esmClass' | 'shortMessage' | 'dataCoding'>,
  gsm7Packed: boolean,
): string | null {
  const { udh, payload } = splitUdh(part);
  const coding = part.dataCoding;
  if (coding === 0 || (coding & 0xfc) === 0xf0) {
    if (!gsm7Packed) return readSeptets(payload, 0, payload.length);
    const septets = unpackSeptets(part.shortMessage);
    return readSeptets(septets, Math.ceil((udh.length * 8) / 7), septets.length);
  }
  if (coding === 1 || coding === 3) return payload.toString('latin1');
  if (coding === 8)
    return Buffer.from(payload.subarray(0, payload.length & ~1))
      .swap16()
      .toString('utf16le');
  return null;
}

/** A fixed number of the latest items: the simulator takes tens of thousands of submits a second. */
export class Ring<T> {
  private items: T[] = [];
  private next = 0;
  private readonly capacity: number;
  constructor(capacity: number) {
    this.capacity = capacity;
  }
  push(item: T): void {
    if (this.items.length < this.capacity) this.items.push(item);
    else this.items[this.next] = item;
    this.next = (this.next + 1) % this.capacity;
  }
  get size(): number {
    return this.items.length;
  }
  /** Oldest first. */
  values(): T[] {
    if (this.items.length < this.capacity) return this.items.slice();
    return [...this.items.slice(this.next), ...this.items.slice(0, this.next)];
  }
  clear(): void {
    this.items = [];
    this.next = 0;
  }
}

const hex = (bytes: Buffer) => bytes.toString('hex');

export function partView(part: TakenPart, gsm7Packed: boolean) {
  const { udh } = splitUdh(part);
  return {
    messageId: part.messageId,
    systemId: part.systemId,
    source: part.source,
    destination: part.destination,
    esmClass: part.esmClass,
    dataCoding: part.dataCoding,
    registeredDelivery: part.registeredDelivery,
    concatenation: part.sar ?? concatenationOf(udh) ?? null,
    text: decodePart(part, gsm7Packed),
    udh: hex(udh),
    shortMessage: hex(part.shortMessage),
    outcome: part.outcome,
    receivedAt: new Date(part.receivedAt).toISOString(),
  };
}

export type PartView = ReturnType<typeof partView>;

export interface MessageView {
  recipient: string;
  source: Address;
  destination: Address;
  systemId: string;
  dataCoding: number;
  /** The parts' texts in sequence order (those that arrived); null when a part is binary. */
  text: string | null;
  /** Every part of a concatenated message arrived (always true for a single part). */
  complete: boolean;
  parts: PartView[];
}

/**
 * Messages from parts, in the order their first part arrived. A part joins the latest
 * message with its sender, recipient, reference and total while that message is still
 * missing the part's sequence number; otherwise (a reference reused later, or a part sent
 * again) it starts a new one, so a resend shows as a message of its own.
 */
export function reassemble(parts: TakenPart[], gsm7Packed: boolean): MessageView[] {
  const messages: MessageView[] = [];
  const open = new Map<string, { message: MessageView; total: number; sequences: Set<number> }>();
  for (const part of parts) {
    const view = partView(part, gsm7Packed);
    const concatenation = view.concatenation;
    if (concatenation) {
      const key = [
        part.systemId,
        part.source.addr,
        part.destination.addr,
        concatenation.reference,
        concatenation.total,
      ].join('\u0000');
      const current = open.get(key);
      if (current && !current.sequences.has(concatenation.sequence)) {
        current.message.parts.push(view);
        current.sequences.add(concatenation.sequence);
        current.message.complete = current.sequences.size === current.total;
        continue;
      }
      const message = newMessage(part, view, concatenation.total === 1);
      open.set(key, { message, total: concatenation.total, sequences: new Set([concatenation.sequence]) });
      messages.push(message);
    } else {
      messages.push(newMessage(part, view, true));
    }
  }
  for (const message of messages) {
    message.parts.sort((a, b) => (a.concatenation?.sequence ?? 0) - (b.concatenation?.sequence ?? 0));
    const texts = message.parts.map((part) => part.text);
    message.text = texts.includes(null) ? null : texts.join('');
  }
  return messages;
}

function newMessage(part: TakenPart, view: PartView, complete: boolean): MessageView {
  return {
    recipient: part.destination.addr,
    source: part.source,
    destination: part.destination,
    systemId: part.systemId,
    dataCoding: part.dataCoding,
    text: null,
    complete,
    parts: [view],
  };
}
