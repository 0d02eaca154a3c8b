import { createHmac, timingSafeEqual, type KeyObject } from 'node:crypto';
import { decodeBase64url } from '../http/base64url.ts';

/**
 * The tokens of an email's tracking URLs (`/t/c/<token>`, `/t/o/<token>`, `/t/u/<token>`):
 * what they name (a recipient row, the kind, a link's index), signed with HMAC-SHA-256 under
 * a key of their own (email/tracking.ts derives it from ENCRYPTION_KEY). Not forgeable or
 * enumerable (a token without its tag does not verify, and the tag is 128 bits), and they
 * carry no address: a recipient's row id is all they name.
 *
 * Written base64url of: kind (1 byte) | recipient id (8 bytes, big-endian) | link index
 * (2 bytes, clicks only) | tag (the first 16 bytes of the HMAC of the kind and recipient id).
 *
 * The tag leaves a click's link index out, so a recipient's click tokens share one HMAC: a
 * message has one per link (50 on the bench's newsletter), and one each was a tenth of
 * rendering's CPU. Nothing is lost: changing the index names another link of the same
 * message for the same recipient, which whoever holds the message can click anyway.
 */

export type TrackingKind = 'click' | 'open' | 'unsubscribe' | 'bounce';

export interface TrackingClaim {
  recipientId: number;
  kind: TrackingKind;
  link?: number;
}

const KINDS: TrackingKind[] = ['click', 'open', 'unsubscribe', 'bounce'];
const TAG_BYTES = 16;

const tag = (key: KeyObject, claim: Buffer) => createHmac('sha256', key).update(claim).digest().subarray(0, TAG_BYTES);

/** The signed part of a claim: its kind and recipient. */
function head(kind: TrackingKind, recipientId: number): Buffer {
  const bytes = Buffer.alloc(9);
  bytes.writeUInt8(KINDS.indexOf(kind), 0);
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
  const signed = head(claim.kind, claim.recipientId);
  return Buffer.concat(
    claim.kind === 'click' ? [signed, linkBytes(claim.link ?? 0), tag(key, signed)] : [signed, tag(key, signed)],
  );
}

export function trackingToken(key: KeyObject, claim: TrackingClaim): string {
  return tokenBytes(key, claim).toString('base64url');
}

/** A recipient's click token for each link, the HMAC made once for them all. */
export function clickTokens(key: KeyObject, recipientId: number): (link: number) => string {
  const signed = head('click', recipientId);
  const signature = tag(key, signed);
  return (link) => Buffer.concat([signed, linkBytes(link), signature]).toString('base64url');
}

/**
 * The same token for a mailbox's local part (the VERP return path, the `mailto:` of
 * List-Unsubscribe): lower-case hex, since mail systems may change the case of a local part
 * on its way back, and 50 characters, so `unsubscribe+<token>` stays within the 64 a local part may have.
 */
export function mailboxToken(key: KeyObject, claim: TrackingClaim): string {
  return tokenBytes(key, claim).toString('hex');
}

/** The claim of a mailbox token, whatever its case, or null when it was not made under `key`. */
export function readMailboxToken(key: KeyObject, token: string): TrackingClaim | null {
  if (!/^(?:[0-9a-fA-F]{2}){25,27}$/.test(token)) return null;
  return readClaim(key, Buffer.from(token, 'hex'));
}

/**
 * The claim of a token, or null when it was not made under `key` (forged, altered, cut) or is
 * not written exactly as it was made (a character appended): one claim has one token.
 */
export function readTrackingToken(key: KeyObject, token: string): TrackingClaim | null {
  const bytes = token.length <= 64 ? decodeBase64url(token) : null;
  return bytes && readClaim(key, bytes);
}

function readClaim(key: KeyObject, bytes: Buffer): TrackingClaim | null {
  const kind = KINDS[bytes[0]];
  if (kind === undefined || bytes.length !== (kind === 'click' ? 11 : 9) + TAG_BYTES) return null;
  const claim = bytes.subarray(0, bytes.length - TAG_BYTES);
  if (!timingSafeEqual(tag(key, claim.subarray(0, 9)), bytes.subarray(claim.length))) return null;
  const recipientId = Number(claim.readBigUInt64BE(1));
  return kind === 'click' ? { recipientId, kind, link: claim.readUInt16BE(9) } : { recipientId, kind };
}
