import type { Keyring } from '../sealed.ts';
import type { RecipientUrls } from './render.ts';
import { readTrackingToken, trackingToken, type TrackingClaim } from './tracking-tokens.ts';

/** The paths of tracking URLs: a click, the open pixel, unsubscribing. */
export const TRACKING_PATHS = { click: '/t/c', open: '/t/o', unsubscribe: '/t/u' } as const;

/** The keys of tracking tokens, derived from ENCRYPTION_KEY and those it replaced: no other use of those keys can make one. */
export function trackingKey(encryptionKeys: Keyring): Keyring {
  return encryptionKeys.derive('herald email tracking tokens');
}

/** A token's claim, under whichever key of the ring made it (a message sent before ENCRYPTION_KEY was replaced still tracks); null when none did. */
export function readToken(keys: Keyring, token: string): TrackingClaim | null {
  for (const key of keys.all) {
    const claim = readTrackingToken(key, token);
    if (claim) return claim;
  }
  return null;
}

/** A recipient's tracking URLs, under PUBLIC_URL: each names the recipient's row by a signed token. */
export function recipientUrls(keys: Keyring, publicUrl: string, recipientId: number): RecipientUrls {
  const key = keys.current;
  return {
    click: (link) => `${publicUrl}${TRACKING_PATHS.click}/${trackingToken(key, { recipientId, kind: 'click', link })}`,
    open: `${publicUrl}${TRACKING_PATHS.open}/${trackingToken(key, { recipientId, kind: 'open' })}`,
    unsubscribe: `${publicUrl}${TRACKING_PATHS.unsubscribe}/${trackingToken(key, { recipientId, kind: 'unsubscribe' })}`,
  };
}
