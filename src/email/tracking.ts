import type { Keyring } from '../sealed.ts';
import type { RecipientUrls } from './render.ts';
import {
  clickTokens,
  mailboxToken,
  readMailboxToken,
  readTrackingToken,
  trackingToken,
  type TrackingClaim,
} from './tracking-tokens.ts';

/** The paths of tracking URLs: a click, the open pixel, unsubscribing. */
export const TRACKING_PATHS = { click: '/t/c', open: '/t/o', unsubscribe: '/t/u' } as const;

/**
 * The keys of tracking tokens, derived from ENCRYPTION_KEY and those it replaced: no other use of
 * those keys can make one.
 */
export function trackingKey(encryptionKeys: Keyring): Keyring {
  return encryptionKeys.derive('herald email tracking tokens');
}

/**
 * A token's claim, under whichever key of the ring made it (a message sent before ENCRYPTION_KEY
 * was replaced still tracks); null when none did.
 */
export function readToken(keys: Keyring, token: string): TrackingClaim | null {
  for (const key of keys.all) {
    const claim = readTrackingToken(key, token);
    if (claim) return claim;
  }
  return null;
}

/**
 * A recipient's tracking URLs, under PUBLIC_URL: each names the recipient's row by a signed
 * token. With `mailboxDomain` (BOUNCE_DOMAIN, when the inbound listener takes its mail) also
 * List-Unsubscribe's `mailto:` there (ARCHITECTURE.md).
 */
export function recipientUrls(
  keys: Keyring,
  publicUrl: string,
  recipientId: number,
  mailboxDomain?: string,
): RecipientUrls {
  const key = keys.current;
  const click = clickTokens(key, recipientId);
  const token = (kind: 'open' | 'unsubscribe') => trackingToken(key, { recipientId, kind });
  return {
    click: (link) => `${publicUrl}${TRACKING_PATHS.click}/${click(link)}`,
    open: `${publicUrl}${TRACKING_PATHS.open}/${token('open')}`,
    unsubscribe: `${publicUrl}${TRACKING_PATHS.unsubscribe}/${token('unsubscribe')}`,
    ...(mailboxDomain !== undefined && {
      unsubscribeMailto: `mailto:${unsubscribeMailbox(keys, mailboxDomain, recipientId)}`,
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
export function returnPath(keys: Keyring, bounceDomain: string, recipientId: number): string {
  return `${MAILBOXES.bounce}+${mailboxToken(keys.current, { recipientId, kind: 'bounce' })}@${bounceDomain}`;
}

/**
 * A recipient's `mailto:` unsubscribe address, `unsubscribe+<token>@<bounce domain>` (mail to it
 * unsubscribes, as the one-click POST does).
 */
export function unsubscribeMailbox(keys: Keyring, bounceDomain: string, recipientId: number): string {
  return `${MAILBOXES.unsubscribe}+${mailboxToken(keys.current, { recipientId, kind: 'unsubscribe' })}@${bounceDomain}`;
}

/**
 * What an address Herald receives mail at names: a bounce to a message's return path or an
 * unsubscribe request, with its recipient's row; null for any other address, or a token no
 * key of the ring made. The domain is not checked: the listener decides which it serves.
 */
export function readMailbox(
  keys: Keyring,
  address: string,
): { kind: 'bounce' | 'unsubscribe'; recipientId: number } | null {
  const match = /^(bounces|unsubscribe)\+([0-9a-f]+)@/i.exec(address);
  if (!match) return null;
  const kind = match[1].toLowerCase() === MAILBOXES.bounce ? 'bounce' : 'unsubscribe';
  for (const key of keys.all) {
    const claim = readMailboxToken(key, match[2]);
    if (claim) return claim.kind === kind ? { kind, recipientId: claim.recipientId } : null;
  }
  return null;
}
