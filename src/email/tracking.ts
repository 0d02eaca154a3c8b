import { createSecretKey, hkdfSync, type KeyObject } from 'node:crypto';
import type { RecipientUrls } from './render.ts';
import { trackingToken } from './tracking-tokens.ts';

/** The paths of tracking URLs: a click, the open pixel, unsubscribing. */
export const TRACKING_PATHS = { click: '/t/c', open: '/t/o', unsubscribe: '/t/u' } as const;

const keys = new WeakMap<KeyObject, KeyObject>();

/** The key of tracking tokens, derived from ENCRYPTION_KEY (RFC 5869), once per key: no other use of that key can make one. */
export function trackingKey(encryptionKey: KeyObject): KeyObject {
  let key = keys.get(encryptionKey);
  if (!key) {
    key = createSecretKey(Buffer.from(hkdfSync('sha256', encryptionKey, Buffer.alloc(0), 'herald email tracking tokens', 32)));
    keys.set(encryptionKey, key);
  }
  return key;
}

/** A recipient's tracking URLs, under PUBLIC_URL: each names the recipient's row by a signed token. */
export function recipientUrls(key: KeyObject, publicUrl: string, recipientId: number): RecipientUrls {
  return {
    click: (link) => `${publicUrl}${TRACKING_PATHS.click}/${trackingToken(key, { recipientId, kind: 'click', link })}`,
    open: `${publicUrl}${TRACKING_PATHS.open}/${trackingToken(key, { recipientId, kind: 'open' })}`,
    unsubscribe: `${publicUrl}${TRACKING_PATHS.unsubscribe}/${trackingToken(key, { recipientId, kind: 'unsubscribe' })}`,
  };
}
