import { open, seal, type Keyring } from '../sealed.ts';
import type { StoredRecipient } from '../messaging/recipients.ts';
import { sealedTags } from '../messaging/sealed-tags.ts';
import type { SmsContent, StoredSmsContent } from './accept.ts';
import type { SmsDraft } from './draft.ts';

/**
 * `isBodyEncrypted` (SPEC §2.1) for SMS: what a send stores of its text. With it, the body
 * and every tag value the request gives (the single's top-level tags, each recipient's own:
 * a passcode travels as a tag value) are sealed, each bound to its send or recipient, and
 * opened by the worker just before it renders. Sealing is done on the request's thread,
 * before anything is written, so no statement, error or log of the write holds the clear text.
 */

const contentPlace = (sendId: string) => `sends.content:${sendId}`;

/** sends.content and the request recipients' tags as they are written for `draft`. */
export function storedSms(
  draft: SmsDraft,
  sendId: string,
  keys: Keyring,
): { content: StoredSmsContent; recipients: StoredRecipient[] } {
  const { kind, senderName, body, tags, landingPageId, shortener, isBodyEncrypted, opensInSandbox, smartEncoding } =
    draft;
  const local = {
    ...(draft.localDelivery && { localDelivery: draft.localDelivery }),
    ...(draft.validUntil !== undefined && { validUntil: draft.validUntil }),
  };
  const stored = (address: string, own: Record<string, string>) => {
    if (Object.keys(own).length === 0) return null;
    return isBodyEncrypted ? sealedTags(keys, sendId, address, JSON.stringify(own)) : JSON.stringify(own);
  };
  return {
    content: isBodyEncrypted
      ? {
          kind,
          senderName,
          landingPageId,
          shortener,
          smartEncoding,
          ...local,
          ...(opensInSandbox && { opensInSandbox }),
          sealed: seal(keys.current, JSON.stringify({ body, tags }), contentPlace(sendId)),
        }
      : { kind, senderName, landingPageId, shortener, smartEncoding, ...local, body, tags },
    recipients: draft.recipients.map((r) => ({
      address: r.mobile,
      tags: stored(r.mobile, r.tags),
      contactId: r.contactId,
    })),
  };
}

/** A send's content in clear, and whether it was sealed (its rendered texts are then sealed wherever they are kept). */
export function openedContent(
  content: StoredSmsContent,
  sendId: string,
  keys: Keyring,
): { content: SmsContent; sealed: boolean } {
  if (!('sealed' in content)) return { content, sealed: false };
  const { sealed, ...settings } = content;
  const { body, tags } = JSON.parse(open(keys, sealed, contentPlace(sendId))) as Pick<SmsContent, 'body' | 'tags'>;
  return { content: { ...settings, body, tags }, sealed: true };
}

/** What the sandbox's sealed copy of a part is bound to: its message and part (transports/sandbox.ts). */
export const sandboxTextPlace = (messageId: string, part: number) => `sandbox_sms.text:${messageId}/${part}`;
