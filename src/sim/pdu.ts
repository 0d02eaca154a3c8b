/**
 * The simulator's inbound side of SMPP 3.4: splitting the byte stream into PDUs and reading
 * the few it answers. Outbound PDUs are encoded by the `smpp` package. Its decoder is not
 * used here: it turns short_message into text by its own reading of data_coding (packed
 * GSM-7 comes out garbled) and drops the bytes, while the simulator must keep them exactly
 * as sent, and it copies every PDU twice, where this reads fields in place.
 */

export const COMMAND = {
  generic_nack: 0x80000000,
  bind_receiver: 0x00000001,
  bind_transmitter: 0x00000002,
  submit_sm: 0x00000004,
  deliver_sm: 0x00000005,
  deliver_sm_resp: 0x80000005,
  unbind: 0x00000006,
  unbind_resp: 0x80000006,
  bind_transceiver: 0x00000009,
  enquire_link: 0x00000015,
  enquire_link_resp: 0x80000015,
} as const;

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
  /** short_message, or the message_payload TLV when short_message is empty (SMPP 3.4 §5.3.2.32). A view into the PDU. */
  message: Buffer;
  /** The SAR TLVs' concatenation (SMPP 3.4 §5.3.2.22–24), when present: the alternative to a UDH. */
  sar: { reference: number; total: number; sequence: number } | undefined;
}

const TLV = { message_payload: 0x0424, sar_msg_ref_num: 0x020c, sar_total_segments: 0x020e, sar_segment_seqnum: 0x020f };

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
  const sar = reference !== undefined && total !== undefined && sequence !== undefined ? { reference, total, sequence } : undefined;
  return { source, destination, esmClass, registeredDelivery, dataCoding, message, sar };
}
