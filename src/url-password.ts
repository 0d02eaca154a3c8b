import type { KeyObject } from 'node:crypto';
import { Keyring, sealRepeatably, SEALED_PREFIX, tryOpen } from './sealed.ts';

/**
 * A webhook URL may carry credentials (`https://user:password@host/hook`, or a token alone as
 * the user name: `https://token@host/hook`), which Herald must use and so cannot hash: where a
 * URL is kept, its secret part (the password, or the user name when there is no password) is
 * sealed in place and opened only to post (webhooks/deliver.ts). The key is one Herald keeps
 * for good, sealed under ENCRYPTION_KEY (webhooks/url-passwords.ts), and the seal repeatable
 * (sealed.ts, sealRepeatably): one URL keeps one form, across a replacement of ENCRYPTION_KEY
 * too, so streams of events and endpoints are still told apart by the URL as it rests. The rest
 * of the URL stays as it was, for reads to show.
 */
const PLACE = 'webhook URL credentials';

/** How a sealed part begins in a URL, its `:` percent-encoded as the URL's userinfo has it. */
const SEALED_PART = encodeURIComponent(SEALED_PREFIX);

type SecretPart = 'password' | 'username';

/**
 * A sealed part, whether it opens or not: the prefix, then the base64url of an IV and a tag at
 * least, which no one chooses as a password. One sealed under a key lost since stays as it is:
 * sealed again, it would open to its old sealed text, posted as the password.
 */
const SEALED_SHAPE = new RegExp(`^${SEALED_PART}[A-Za-z0-9_-]{38,}$`);

const secretPart = (url: URL): SecretPart | undefined =>
  url.password !== '' ? 'password' : url.username !== '' ? 'username' : undefined;

const opened = (key: KeyObject, sealed: string) =>
  tryOpen(new Keyring(key), SEALED_PREFIX + sealed.slice(SEALED_PART.length), PLACE);

/** The URL as kept, parsed, and its secret part if that is sealed (whether or not it opens). */
function sealedPartOf(kept: string): { url: URL; part: SecretPart } | undefined {
  const url = URL.parse(kept);
  const part = url ? secretPart(url) : undefined;
  return url && part && SEALED_SHAPE.test(url[part]) ? { url, part } : undefined;
}

/** Whether the URL as kept has its secret part sealed, whether or not it opens. */
export const isSealedUrl = (kept: string): boolean => sealedPartOf(kept) !== undefined;

/** A URL as a read may show it: its password, or a user name without one, replaced by `***`. */
export function shownUrl(raw: string): string {
  const url = URL.parse(raw);
  const part = url && secretPart(url);
  if (!url || !part) return raw;
  url[part] = '***';
  return url.href;
}

/** The URL as it is kept: its secret part, if any, sealed. */
export function keptUrl(key: KeyObject, raw: string): string {
  const url = URL.parse(raw);
  const part = url && secretPart(url);
  if (!url || !part) return raw;
  url[part] = sealRepeatably(key, url[part], PLACE);
  return url.href;
}

/**
 * The URL to post to, its secret part opened; undefined when it does not open (sealed under a
 * key Herald no longer has). One not sealed was kept before they were.
 */
export function usableUrl(key: KeyObject, kept: string): string | undefined {
  const sealed = sealedPartOf(kept);
  if (!sealed) return kept;
  const { url, part } = sealed;
  const clear = opened(key, url[part]);
  if (clear === undefined) return undefined;
  url[part] = clear;
  return url.href;
}

/** The kept URL with its secret part sealed where it is in clear (kept before they were sealed); else undefined. */
export function sealedIfClear(key: KeyObject, kept: string): string | undefined {
  const url = URL.parse(kept);
  const part = url && secretPart(url);
  if (!url || !part) return undefined;
  return SEALED_SHAPE.test(url[part]) ? undefined : keptUrl(key, kept);
}
