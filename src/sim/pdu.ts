/**
 * The SMPP 3.4 PDUs the simulator reads and writes, done here rather than by the `smpp`
 * package that Herald's ESME side uses:
 * - its decoder turns short_message into text by its own reading of data_coding (packed
 *   GSM-7 comes out garbled) and drops the bytes, which the simulator must keep as sent;
 * - its encoder took two-fifths of the simulator's CPU with a receipt per submit
 *   (bench/smsc.ts), for PDUs that are a header and a few fields;
 * - an SMSC written apart from the ESME's library is a truer test of it: the tests drive
 *   this one with the package.
 */

export const COMMAND = {
  generic_nack: 0x80000000,
  bind_receiver: 0x00000001,
  bind_transmitter: 0x00000002,
  submit_sm: 0x00000004,
  submit_sm_resp: 0x80000004,
  deliver_sm: 0x00000005,
  deliver_sm_resp: 0x80000005,
  unbind: 0x00000006,
  unbind_resp: 0x80000006,
  bind_transceiver: 0x00000009,
  enquire_link: 0x00000015,
  enquire_link_resp: 0x80000015,
} as const;

/** command_status values (SMPP 3.4 §5.1.3) the simulator answers with. */
export const STATUS = {
  ESME_ROK: 0x00,
  ESME_RINVCMDLEN: 0x02,
  ESME_RINVCMDID: 0x03,
  ESME_RINVBNDSTS: 0x04,
  ESME_RALYBND: 0x05,
  ESME_RINVDSTADR: 0x0b,
  ESME_RINVPASWD: 0x0e,
  ESME_RINVSYSID: 0x0f,
  ESME_RMSGQFUL: 0x14,
  ESME_RTHROTTLED: 0x58,
} as const;

/** A request's response command_id: the request's with the top bit set. */
export const RESPONSE_BIT = 0x80000000;

const HEADER_LENGTH = 16;
/** The longest PDU accepted: a submit_sm with a full message_payload TLV is well under it. */
const MAX_PDU_LENGTH = 65536;

export class MalformedPdu extends Error {}

export interface Header {
  commandId: number;
  status: number;
  sequence: number;
}

export const readHeader = (pdu: Buffer): Header => ({
  commandId: pdu.readUInt32BE(4),
  status: pdu.readUInt32BE(8),
  sequence: pdu.readUInt32BE(12),
});

/**
 * A function to feed socket chunks to: it calls onPdu with each whole PDU (a view into the
 * chunk, valid until onPdu returns) and stops when onPdu returns false. Throws MalformedPdu
 * on a command_length SMPP cannot have; the connection is beyond repair then.
 */
export function pduSplitter(onPdu: (pdu: Buffer) => boolean): (chunk: Buffer) => void {
  let held: Buffer | undefined;
  return (chunk) => {
    const data = held ? Buffer.concat([held, chunk]) : chunk;
    held = undefined;
    let offset = 0;
    while (data.length - offset >= 4) {
      const length = data.readUInt32BE(offset);
      if (length < HEADER_LENGTH || length > MAX_PDU_LENGTH) throw new MalformedPdu(`command_length ${length}`);
      if (data.length - offset < length) break;
      const pdu = data.subarray(offset, offset + length);
      offset += length;
      if (!onPdu(pdu)) return;
    }
    // Copied: a view would keep the whole chunk alive for a few bytes.
    if (offset < data.length) held = Buffer.from(data.subarray(offset));
  };
}

/** Reads a PDU body field by field; throws MalformedPdu where a field runs past the end. */
class FieldReader {
  readonly pdu: Buffer;
  offset = HEADER_LENGTH;
  constructor(pdu: Buffer) {
    this.pdu = pdu;
  }
  get done(): boolean {
    return this.offset >= this.pdu.length;
  }
  int8(): number {
    if (this.offset >= this.pdu.length) throw new MalformedPdu('a field runs past the end of the PDU');
    return this.pdu[this.offset++];
  }
  int16(): number {
    this.need(2);
    const value = this.pdu.readUInt16BE(this.offset);
    this.offset += 2;
    return value;
  }
  cstring(): string {
    const end = this.pdu.indexOf(0, this.offset);
    if (end < 0) throw new MalformedPdu('a C-Octet String has no terminating NUL');
    const value = this.pdu.toString('latin1', this.offset, end);
    this.offset = end + 1;
    return value;
  }
  bytes(length: number): Buffer {
    this.need(length);
    const value = this.pdu.subarray(this.offset, this.offset + length);
    this.offset += length;
    return value;
  }
  private need(length: number): void {
    if (this.offset + length > this.pdu.length) throw new MalformedPdu('a field runs past the end of the PDU');
  }
}

export interface Bind {
  systemId: string;
  password: string;
}

/** bind_transmitter, bind_receiver and bind_transceiver share a body (SMPP 3.4 §4.1); the rest of it is not used. */
export function readBind(pdu: Buffer): Bind {
  const reader = new FieldReader(pdu);
  return { systemId: reader.cstring(), password: reader.cstring() };
}

export interface Address {
  ton: number;
  npi: number;
  addr: string;
}

export interface Submit {
  source: Address;
  destination: Address;
  esmClass: number;
  registeredDelivery: number;
  dataCoding: number;
  /**
   * short_message, or the message_payload TLV when short_message is empty (SMPP 3.4 §5.3.2.32). A
   * view into the PDU.
   */
  message: Buffer;
  /** The SAR TLVs' concatenation (SMPP 3.4 §5.3.2.22–24), when present: the alternative to a UDH. */
  sar: { reference: number; total: number; sequence: number } | undefined;
}

const TLV = {
  message_payload: 0x0424,
  sar_msg_ref_num: 0x020c,
  sar_total_segments: 0x020e,
  sar_segment_seqnum: 0x020f,
};

/** submit_sm (SMPP 3.4 §4.4.1). */
export function readSubmit(pdu: Buffer): Submit {
  const reader = new FieldReader(pdu);
  reader.cstring(); // service_type
  const source = { ton: reader.int8(), npi: reader.int8(), addr: reader.cstring() };
  const destination = { ton: reader.int8(), npi: reader.int8(), addr: reader.cstring() };
  const esmClass = reader.int8();
  reader.int8(); // protocol_id
  reader.int8(); // priority_flag
  reader.cstring(); // schedule_delivery_time
  reader.cstring(); // validity_period
  const registeredDelivery = reader.int8();
  reader.int8(); // replace_if_present_flag
  const dataCoding = reader.int8();
  reader.int8(); // sm_default_msg_id
  let message = reader.bytes(reader.int8());
  let reference: number | undefined;
  let total: number | undefined;
  let sequence: number | undefined;
  while (!reader.done) {
    const tag = reader.int16();
    const value = reader.bytes(reader.int16());
    if (tag === TLV.message_payload && message.length === 0) message = value;
    else if (tag === TLV.sar_msg_ref_num && value.length === 2) reference = value.readUInt16BE(0);
    else if (tag === TLV.sar_total_segments && value.length === 1) total = value[0];
    else if (tag === TLV.sar_segment_seqnum && value.length === 1) sequence = value[0];
  }
  const sar =
    reference !== undefined && total !== undefined && sequence !== undefined
      ? { reference, total, sequence }
      : undefined;
  return { source, destination, esmClass, registeredDelivery, dataCoding, message, sar };
}

function writeHeader(pdu: Buffer, commandId: number, status: number, sequence: number): void {
  pdu.writeUInt32BE(pdu.length, 0);
  pdu.writeUInt32BE(commandId, 4);
  pdu.writeUInt32BE(status, 8);
  pdu.writeUInt32BE(sequence, 12);
}

/**
 * A response: header only when it reports an error or has no body, else the one C-Octet
 * String its body is (message_id of submit_sm_resp, system_id of a bind response).
 */
export function encodeResponse(commandId: number, status: number, sequence: number, body?: string): Buffer {
  const withBody = status === STATUS.ESME_ROK && body !== undefined;
  const pdu = Buffer.allocUnsafe(HEADER_LENGTH + (withBody ? body.length + 1 : 0));
  writeHeader(pdu, commandId, status, sequence);
  if (withBody) {
    pdu.write(body, HEADER_LENGTH, 'latin1');
    pdu[pdu.length - 1] = 0;
  }
  return pdu;
}

export interface Deliver {
  source: Address;
  destination: Address;
  esmClass: number;
  dataCoding: number;
  shortMessage: Uint8Array;
  /** A receipt's TLVs (SMPP 3.4 §5.3.2.12, §5.3.2.35). */
  receiptedMessageId?: string;
  messageState?: number;
}

const TLV_HEADER = 4;
const TLV_RECEIPTED_MESSAGE_ID = 0x001e;
const TLV_MESSAGE_STATE = 0x0427;

/** deliver_sm (SMPP 3.4 §4.6.1), its optional fields empty or zero. */
export function encodeDeliverSm(sequence: number, deliver: Deliver): Buffer {
  const { source, destination, shortMessage, receiptedMessageId, messageState } = deliver;
  if (shortMessage.length > 254) throw new RangeError('a short_message holds at most 254 octets');
  const length =
    HEADER_LENGTH +
    1 +
    2 +
    source.addr.length +
    1 +
    2 +
    destination.addr.length +
    1 +
    12 +
    shortMessage.length +
    (receiptedMessageId === undefined ? 0 : TLV_HEADER + receiptedMessageId.length + 1) +
    (messageState === undefined ? 0 : TLV_HEADER + 1);
  const pdu = Buffer.alloc(length);
  writeHeader(pdu, COMMAND.deliver_sm, STATUS.ESME_ROK, sequence);
  let offset = HEADER_LENGTH + 1; // service_type: empty
  offset = writeAddress(pdu, offset, source);
  offset = writeAddress(pdu, offset, destination);
  pdu[offset] = deliver.esmClass;
  // protocol_id, priority_flag, schedule_delivery_time, validity_period, registered_delivery,
  // replace_if_present_flag: zero or empty, as Buffer.alloc left them.
  offset += 7;
  pdu[offset++] = deliver.dataCoding;
  offset++; // sm_default_msg_id
  pdu[offset++] = shortMessage.length;
  pdu.set(shortMessage, offset);
  offset += shortMessage.length;
  if (receiptedMessageId !== undefined) {
    pdu.writeUInt16BE(TLV_RECEIPTED_MESSAGE_ID, offset);
    pdu.writeUInt16BE(receiptedMessageId.length + 1, offset + 2);
    pdu.write(receiptedMessageId, offset + TLV_HEADER, 'latin1');
    offset += TLV_HEADER + receiptedMessageId.length + 1;
  }
  if (messageState !== undefined) {
    pdu.writeUInt16BE(TLV_MESSAGE_STATE, offset);
    pdu.writeUInt16BE(1, offset + 2);
    pdu[offset + TLV_HEADER] = messageState;
  }
  return pdu;
}

function writeAddress(pdu: Buffer, offset: number, address: Address): number {
  pdu[offset++] = address.ton;
  pdu[offset++] = address.npi;
  offset += pdu.write(address.addr, offset, 'latin1');
  return offset + 1;
}
