import type { Keyring } from '../sealed.ts';
import type { RecipientUrls } from './render.ts';
import { clickTokens, mailboxToken, type ReadToken, readMailboxToken, trackingToken } from './tracking-tokens.ts';

/** The paths of tracking URLs: a click, the open pixel, unsubscribing. */
export const TRACKING_PATHS = { click: '/t/c', open: '/t/o', unsubscribe: '/t/u' } as const;

/**
 * The keys of tracking tokens, derived from ENCRYPTION_KEY and those it replaced: no other use of
 * those keys can make one.
 */
export function trackingKey(encryptionKeys: Keyring): Keyring {
  return encryptionKeys.derive('herald email tracking tokens');
}

/** A recipient row, as its tokens name it: by its id, signed with its send's. */
export interface TokenRecipient {
  recipientId: number;
  sendId: string;
}

/**
 * A recipient's tracking URLs, under PUBLIC_URL: each names the recipient's row by a signed
 * token. With `mailboxDomain` (BOUNCE_DOMAIN, when the inbound listener takes its mail) also
 * List-Unsubscribe's `mailto:` there (ARCHITECTURE.md).
 */
export function recipientUrls(
  keys: Keyring,
  publicUrl: string,
  recipient: TokenRecipient,
  mailboxDomain?: string,
): RecipientUrls {
  const key = keys.current;
  const click = clickTokens(key, recipient);
  const token = (kind: 'open' | 'unsubscribe') => trackingToken(key, { ...recipient, kind });
  return {
    click: (link) => `${publicUrl}${TRACKING_PATHS.click}/${click(link)}`,
    open: `${publicUrl}${TRACKING_PATHS.open}/${token('open')}`,
    unsubscribe: `${publicUrl}${TRACKING_PATHS.unsubscribe}/${token('unsubscribe')}`,
    ...(mailboxDomain !== undefined && {
      unsubscribeMailto: `mailto:${unsubscribeMailbox(keys, mailboxDomain, recipient)}`,
    }),
  };
}

/**
 * The mailboxes at BOUNCE_DOMAIN that name a message: its VERP return path, and the `mailto:` of
 * its List-Unsubscribe.
 */
const MAILBOXES = { bounce: 'bounces', unsubscribe: 'unsubscribe' } as const;

/** The local part of the feedback-loop mailbox at BOUNCE_DOMAIN, where providers' ARF reports come. */
export const FEEDBACK_MAILBOX = 'fbl';

/** A recipient's VERP return path, `bounces+<token>@<bounce domain>`: a bounce that comes back names its message. */
export function returnPath(keys: Keyring, bounceDomain: string, recipient: TokenRecipient): string {
  return `${MAILBOXES.bounce}+${mailboxToken(keys.current, { ...recipient, kind: 'bounce' })}@${bounceDomain}`;
}

/**
 * A recipient's `mailto:` unsubscribe address, `unsubscribe+<token>@<bounce domain>` (mail to it
 * unsubscribes, as the one-click POST does).
 */
export function unsubscribeMailbox(keys: Keyring, bounceDomain: string, recipient: TokenRecipient): string {
  const token = mailboxToken(keys.current, { ...recipient, kind: 'unsubscribe' });
  return `${MAILBOXES.unsubscribe}+${token}@${bounceDomain}`;
}

/**
 * What an address Herald receives mail at names: a bounce to a message's return path or an
 * unsubscribe request, with its token as read (token-recipients.ts checks it against the row it
 * names); null for any other address, or a token of the other kind. The domain is not checked:
 * the listener decides which it serves.
 */
export function readMailbox(address: string): { kind: 'bounce' | 'unsubscribe'; token: ReadToken } | null {
  const match = /^(bounces|unsubscribe)\+([0-9a-f]+)@/i.exec(address);
  if (!match) return null;
  const kind = match[1].toLowerCase() === MAILBOXES.bounce ? 'bounce' : 'unsubscribe';
  const token = readMailboxToken(match[2]);
  return token?.kind === kind ? { kind, token } : null;
}

export type InboundMailbox = { kind: 'bounce' | 'unsubscribe'; token: ReadToken } | { kind: 'feedback' };

/**
 * The mailbox an address at the inbound listener names, its token as read (not yet checked);
 * null for an address at another domain, or none of the listener's.
 */
export function inboundMailbox(address: string, bounceDomain: string): InboundMailbox | null {
  const at = address.lastIndexOf('@');
  if (at < 1 || address.slice(at + 1).toLowerCase() !== bounceDomain) return null;
  if (address.slice(0, at).toLowerCase() === FEEDBACK_MAILBOX) return { kind: 'feedback' };
  return readMailbox(address);
}
