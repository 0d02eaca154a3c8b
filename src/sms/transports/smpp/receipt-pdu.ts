import { idReadings } from './message-ids.ts';

/** A delivery receipt as a deliver_sm carries it (SMPP 3.4 §5.2.12, Appendix B). */
export interface DeliveryReceipt {
  /** The receipt's source address: the recipient of the message it reports on. */
  recipient: string;
  /** The ids the receipt can name, the likeliest first (message-ids.ts). */
  readings: string[];
  /** SMPP's `stat` word (DELIVRD, UNDELIV…), as receipts.ts's PART_STATUS names them. */
  state: string;
  errorCode: string | null;
}

/** esm_class message types (SMPP 3.4 §5.2.12): an SMSC delivery receipt, and an intermediate notification. */
const ESM_RECEIPT = 0x04;
const ESM_INTERMEDIATE = 0x20;

/** message_state TLV values (SMPP 3.4 §5.2.28) as the receipt text's `stat` words. */
const STATE_WORD: Record<number, string> = {
  1: 'ENROUTE',
  2: 'DELIVRD',
  3: 'EXPIRED',
  4: 'DELETED',
  5: 'UNDELIV',
  6: 'ACCEPTD',
  7: 'UNKNOWN',
  8: 'REJECTD',
};

interface DeliverSmFields {
  esm_class?: number;
  source_addr?: string;
  short_message?: { message: string | Buffer };
  message_payload?: { message: string | Buffer };
  receipted_message_id?: string;
  message_state?: number;
}

/**
 * What a deliver_sm carries: its short_message, or its message_payload TLV when that is empty
 * (SMPP 3.4 §5.3.2.32: a longer text goes there, with sm_length 0).
 */
export function carriedMessage(pdu: DeliverSmFields): string | Buffer | undefined {
  const short = pdu.short_message?.message;
  return short === undefined || short.length === 0 ? (pdu.message_payload?.message ?? short) : short;
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is its purpose
const CONTROL = /[\u0000-\u001f\u007f]/;

/** Whether a deliver_sm is a receipt (or an intermediate notification) rather than a message from a handset. */
export const isReceipt = (pdu: DeliverSmFields) => ((pdu.esm_class ?? 0) & (ESM_RECEIPT | ESM_INTERMEDIATE)) !== 0;

/**
 * The receipt a deliver_sm carries, from its TLVs (receipted_message_id, message_state) and its
 * text (`id:… stat:… err:…`, Appendix B), either of which an SMSC may leave out; null when it
 * names no id or no state.
 */
export function readReceipt(pdu: DeliverSmFields): DeliveryReceipt | null {
  const message = carriedMessage(pdu);
  const text = typeof message === 'string' ? message : message ? message.toString('latin1') : '';
  const field = (name: string) => new RegExp(`(?:^|\\s)${name}:(\\S+)`, 'i').exec(text)?.[1];
  const ids = [pdu.receipted_message_id, field('id')].filter(
    (id): id is string => id !== undefined && id.trim() !== '',
  );
  // A receipt with a control character in a field it is read by (a NUL kept by a data_coding the
  // package leaves as bytes) is not one Herald can read: PostgreSQL's text cannot even hold it.
  if ([...ids, field('stat'), field('err')].some((value) => value !== undefined && CONTROL.test(value))) return null;
  const stat = field('stat')?.toUpperCase();
  const state = stat ?? (pdu.message_state !== undefined ? STATE_WORD[pdu.message_state] : undefined);
  // E.164 digits, as Herald keeps recipients, whether or not the SMSC writes a leading +.
  const recipient = (pdu.source_addr ?? '').replace(/^\+/, '');
  if (ids.length === 0 || state === undefined || recipient === '') return null;
  return { recipient, readings: [...new Set(ids.flatMap(idReadings))], state, errorCode: field('err') ?? null };
}
