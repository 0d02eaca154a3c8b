import { buffer } from 'node:stream/consumers';
import DKIM from 'nodemailer/lib/dkim';
import type { DkimSigningKey } from '../senders/dkim-keys.ts';

/**
 * DKIM signing (RFC 6376) of a rendered message, by nodemailer's signer: relaxed/relaxed,
 * rsa-sha256. Nothing here reads the database: the key is looked up once per batch
 * (senders/dkim-keys.ts, signingKeyFor) and this runs on every message, so it can move to a worker
 * thread (a KeyObject crosses threads by postMessage).
 */

/**
 * The header fields signed when present (h=). nodemailer's default list (RFC 4871 §5.5's) lacks
 * List-Unsubscribe-Post, which RFC 8058 §4 requires to be signed with List-Unsubscribe for a
 * one-click unsubscribe to be honoured (Gmail's and Yahoo's bulk sender rules).
 */
export const SIGNED_HEADER_FIELDS = [
  'From',
  'Sender',
  'Reply-To',
  'To',
  'Cc',
  'Subject',
  'Date',
  'Message-ID',
  'In-Reply-To',
  'References',
  'MIME-Version',
  'Content-Type',
  'Content-Transfer-Encoding',
  'List-Id',
  'List-Unsubscribe',
  'List-Unsubscribe-Post',
] as const;

const HEADER_FIELD_NAMES = SIGNED_HEADER_FIELDS.join(':');

/** A message the signer could not sign: nodemailer passes it through unsigned, which must never go out. */
export class DkimSigningError extends Error {}

/** The raw MIME message with a DKIM-Signature header field first, made with `key`. */
export async function signEmail(raw: Buffer, key: DkimSigningKey): Promise<Buffer> {
  const signer = new DKIM({
    domainName: key.domain,
    keySelector: key.selector,
    privateKey: key.privateKey,
    headerFieldNames: HEADER_FIELD_NAMES,
  });
  const signed = await buffer(signer.sign(raw));
  // nodemailer answers the message unchanged when the key does not sign (sign.js catches the error).
  if (signed.length === raw.length)
    throw new DkimSigningError(`the DKIM key ${key.selector} of ${key.domain} did not sign the message`);
  return signed;
}
