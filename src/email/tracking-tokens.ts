import { createHmac, timingSafeEqual, type KeyObject } from 'node:crypto';
import { decodeBase64url } from '../http/base64url.ts';

/**
 * The tokens of an email's tracking URLs (`/t/c/<token>`, `/t/o/<token>`, `/t/u/<token>`) and
 * of the mailboxes that name a message (tracking.ts): what they name (a recipient row, the kind,
 * a link's index), signed with HMAC-SHA-256 under a key of their own (tracking.ts derives it
 * from ENCRYPTION_KEY). Not forgeable or enumerable (a token without its tag does not verify,
 * and the tag is 128 bits), and they carry no address: a recipient's row id is all they name.
 *
 * Written base64url of: form and kind (1 byte) | recipient id (8 bytes, big-endian) | link index
 * (2 bytes, clicks only) | tag (the first 16 bytes of the HMAC of the first byte, the recipient
 * id and the id of the recipient's send).
 *
 * The send's id is signed but not written (it would not fit a mailbox's local part): a token is
 * read, then checked against the row it names (token-recipients.ts). A row id alone can name
 * another recipient later: SQLite gives a rowid again once the highest rows are deleted (an
 * account deleted, retention emptying the table), and that recipient must not take the first
 * one's opens, clicks, bounces and unsubscribes.
 *
 * Tokens made before the send was signed (form 0, `bound: false`) still name their recipients
 * (token-recipients.ts): on SQLite the rows written before then only. Messages in inboxes keep
 * working.
 *
 * The tag leaves a click's link index out, so a recipient's click tokens share one HMAC: a
 * message has one per link (50 on the bench's newsletter), and one each was a tenth of
 * rendering's CPU. Nothing is lost: changing the index names another link of the same
 * message for the same recipient, which whoever holds the message can click anyway.
 */

export type TrackingKind = 'click' | 'open' | 'unsubscribe' | 'bounce';

export interface TrackingClaim {
  recipientId: number;
  /** The recipient's send: signed, not written. */
  sendId: string;
  kind: TrackingKind;
  link?: number;
}

/** A token as read, not yet checked: `signedBy` checks it against its recipient's send. */
export interface ReadToken {
  kind: TrackingKind;
  recipientId: number;
  link?: number;
  /** Whether its tag signs the recipient's send (all made now), or only the kind and id (form 0). */
  bound: boolean;
  /** The form-and-kind byte and the recipient id: what the tag signs, before the send's id. */
  head: Buffer;
  tag: Buffer;
}

const KINDS: TrackingKind[] = ['click', 'open', 'unsubscribe', 'bounce'];
const TAG_BYTES = 16;
/** Added to a kind's index in a token's first byte: its tag signs the recipient's send too. */
const BOUND = 0x10;

const hmac = (key: KeyObject, head: Buffer, sendId: string | null) => {
  const mac = createHmac('sha256', key).update(head);
  if (sendId !== null) mac.update(sendId);
  return mac.digest().subarray(0, TAG_BYTES);
};

/** The signed head of a claim: its form and kind, and its recipient. */
function headOf(kind: TrackingKind, recipientId: number): Buffer {
  const bytes = Buffer.alloc(9);
  bytes.writeUInt8(BOUND + KINDS.indexOf(kind), 0);
  bytes.writeBigUInt64BE(BigInt(recipientId), 1);
  return bytes;
}

/** A click token names its link in two bytes: links of a message past these go untracked. */
export const MAX_TRACKED_LINKS = 2 ** 16;

const linkBytes = (link: number) => {
  const bytes = Buffer.alloc(2);
  bytes.writeUInt16BE(link, 0);
  return bytes;
};

function tokenBytes(key: KeyObject, claim: TrackingClaim): Buffer {
  const head = headOf(claim.kind, claim.recipientId);
  const tag = hmac(key, head, claim.sendId);
  return Buffer.concat(claim.kind === 'click' ? [head, linkBytes(claim.link ?? 0), tag] : [head, tag]);
}

export function trackingToken(key: KeyObject, claim: TrackingClaim): string {
  return tokenBytes(key, claim).toString('base64url');
}

/** A recipient's click token for each link, the HMAC made once for them all. */
export function clickTokens(
  key: KeyObject,
  recipient: { recipientId: number; sendId: string },
): (link: number) => string {
  const head = headOf('click', recipient.recipientId);
  const tag = hmac(key, head, recipient.sendId);
  return (link) => Buffer.concat([head, linkBytes(link), tag]).toString('base64url');
}

/**
 * The same token for a mailbox's local part (the VERP return path, the `mailto:` of
 * List-Unsubscribe): lower-case hex, since mail systems may change the case of a local part
 * on its way back, and 50 characters, so `unsubscribe+<token>` stays within the 64 a local part may have.
 */
export function mailboxToken(key: KeyObject, claim: TrackingClaim): string {
  return tokenBytes(key, claim).toString('hex');
}

/** A mailbox token as read, whatever its case; null when it is not one's shape. */
export function readMailboxToken(token: string): ReadToken | null {
  if (!/^(?:[0-9a-fA-F]{2}){25,27}$/.test(token)) return null;
  return readBytes(Buffer.from(token, 'hex'));
}

/**
 * A token as read, or null when it is not one's shape or is not written exactly as it would be
 * made (a character appended): one claim has one token.
 */
export function readTrackingToken(token: string): ReadToken | null {
  const bytes = token.length <= 64 ? decodeBase64url(token) : null;
  return bytes && readBytes(bytes);
}

function readBytes(bytes: Buffer): ReadToken | null {
  const bound = (bytes[0] & BOUND) !== 0;
  const kind = KINDS[bytes[0] & ~BOUND];
  if (kind === undefined || bytes.length !== (kind === 'click' ? 11 : 9) + TAG_BYTES) return null;
  const head = bytes.subarray(0, 9);
  // Read before its tag is checked, and looked up: an id no row can have is no token's.
  const recipientId = head.readBigUInt64BE(1);
  if (recipientId > BigInt(Number.MAX_SAFE_INTEGER)) return null;
  const read = { kind, recipientId: Number(recipientId), bound, head, tag: bytes.subarray(-TAG_BYTES) };
  return kind === 'click' ? { ...read, link: bytes.readUInt16BE(9) } : read;
}

/** Whether `key` made the token for a recipient of this send (a token of form 0: of any send). */
export function signedBy(key: KeyObject, token: ReadToken, sendId: string): boolean {
  return timingSafeEqual(hmac(key, token.head, token.bound ? sendId : null), token.tag);
}
