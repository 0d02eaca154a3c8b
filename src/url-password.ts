import { Keyring, sealRepeatably, SEALED_PREFIX, tryOpen } from './sealed.ts';

/**
 * A webhook URL may carry a password (`https://user:password@host/hook`), which Herald must use
 * and so cannot hash: where a URL is kept, its password is sealed under a key derived from
 * ENCRYPTION_KEY, in place, and opened only to post (webhooks/deliver.ts). The rest of the URL
 * stays as it was, so reads show it and streams of events are told apart by it: the password is
 * sealed repeatably (sealed.ts, sealRepeatably), one URL always keeping one form under one key.
 */
const PURPOSE = 'webhook URL passwords';
const PLACE = 'webhook URL password';

/** How a sealed password begins in a URL, its `:` percent-encoded as the URL's userinfo has it. */
const SEALED_PASSWORD = encodeURIComponent(SEALED_PREFIX);

const sealedPassword = (url: URL) => SEALED_PREFIX + url.password.slice(SEALED_PASSWORD.length);

/**
 * A URL as a read may show it: any password replaced by `***`. An SMSC's URL or a webhook's may
 * carry one, which a read-only key must not learn.
 */
export function shownUrl(raw: string): string {
  const url = URL.parse(raw);
  if (!url || url.password === '') return raw;
  url.password = '***';
  return url.href;
}

/** The URL as it is kept: its password, if any, sealed. */
export function keptUrl(keys: Keyring, raw: string): string {
  const url = URL.parse(raw);
  if (!url || url.password === '') return raw;
  url.password = sealRepeatably(keys.derive(PURPOSE).current, url.password, PLACE);
  return url.href;
}

/**
 * The URL to post to, its password opened; undefined when a key no longer given sealed it. A
 * password not sealed is one kept before they were (server/stored-secrets.ts seals those).
 */
export function usableUrl(keys: Keyring, kept: string): string | undefined {
  const url = URL.parse(kept);
  if (!url?.password.startsWith(SEALED_PASSWORD)) return kept;
  const password = tryOpen(keys.derive(PURPOSE), sealedPassword(url), PLACE);
  if (password === undefined) return undefined;
  url.password = password;
  return url.href;
}

/**
 * The kept URL with its password sealed under the current key, where it is in clear (kept before
 * passwords were sealed) or sealed under a key ENCRYPTION_KEY replaced; undefined when it needs
 * nothing, or a key no longer given sealed it.
 */
export function sealedAnew(keys: Keyring, kept: string): string | undefined {
  const url = URL.parse(kept);
  if (!url || url.password === '') return undefined;
  const ring = keys.derive(PURPOSE);
  if (!url.password.startsWith(SEALED_PASSWORD)) return keptUrl(keys, kept);
  const sealed = sealedPassword(url);
  if (tryOpen(new Keyring(ring.current), sealed, PLACE) !== undefined) return undefined;
  const password = tryOpen(ring, sealed, PLACE);
  if (password === undefined) return undefined;
  url.password = password;
  return keptUrl(keys, url.href);
}
