import type { Part, Encoding } from '../../segments.ts';

/** esm_class UDHI (SMPP 3.4 §5.2.12): short_message starts with a user data header. */
const ESM_UDHI = 0x40;
/** data_coding (SMPP 3.4 §5.2.19): the SMSC default alphabet (GSM-7, one septet a byte here), and UCS-2. */
const DATA_CODING: Record<Encoding, number> = { 'GSM-7': 0, 'UCS-2': 8 };

/**
 * submit_sm fields of one part. The sender: a number (digits, optionally after +) goes as an
 * international number (TON 1, NPI 1 E.164), a name as alphanumeric (TON 5, NPI 0); the
 * recipient is E.164 digits (TON 1, NPI 1). A receipt is asked for every part
 * (registered_delivery 1), and data_coding is always set: left out, the `smpp` package claims
 * IA5 while the bytes are GSM-7 (ARCHITECTURE.md).
 */
export function submitFields(
  message: { sender: string; recipient: string },
  encoding: Encoding,
  part: Part,
): Record<string, unknown> {
  const numeric = /^\+?\d+$/.test(message.sender);
  const bytes = part.shortMessage;
  return {
    source_addr_ton: numeric ? 1 : 5,
    source_addr_npi: numeric ? 1 : 0,
    source_addr: numeric ? message.sender.replace(/^\+/, '') : message.sender,
    dest_addr_ton: 1,
    dest_addr_npi: 1,
    destination_addr: message.recipient,
    esm_class: part.udh.length > 0 ? ESM_UDHI : 0,
    registered_delivery: 1,
    data_coding: DATA_CODING[encoding],
    // A view, not a copy: the package writes a Buffer as it is.
    short_message: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength),
  };
}
