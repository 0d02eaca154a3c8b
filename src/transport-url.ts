import { readFileSync } from 'node:fs';

/**
 * What the transport URLs (sms/transports/smpp/url.ts, email/transports/smtp-url.ts) have in
 * common: a URL of one of its schemes naming its host, with known parameters only, whole-number
 * parameters within limits, and a `ca=` file. Each throws an Error naming the fault (config.ts names the variable), and
 * never repeats the URL, which holds a password and lands in logs.
 */

/**
 * `raw` as a URL of one of `schemes` (`smpp:`…) naming its host (`what`: "the SMSC host") and
 * taking no parameter but `params`.
 */
export function transportUrl(
  raw: string,
  options: { schemes: string[]; example: string; what: string; params: string[] },
): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new Error(`must be a URL such as ${options.example}`);
  }
  const [plain, secure] = options.schemes;
  if (!options.schemes.includes(url.protocol))
    throw new Error(`must start with ${plain}// or ${secure}//, got "${url.protocol}"`);
  if (!url.hostname) throw new Error(`must name ${options.what}`);
  // Outside http(s) a URL's host is taken as written, percent-escapes and all, which no lookup finds.
  if (!/^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)$/.test(url.hostname))
    throw new Error(`must name ${options.what} as a DNS name or an IP address`);
  if (url.port === '0') throw new Error('must name a port from 1 to 65535, or none for the default');
  if (!['', '/'].includes(url.pathname) || url.hash !== '')
    throw new Error(`takes no path or #fragment after ${options.what}, only ?parameters`);
  const names = [...url.searchParams.keys()];
  for (const name of names) {
    if (!options.params.includes(name)) throw new Error(`knows no parameter "${name}" (${options.params.join(', ')})`);
    if (names.indexOf(name) !== names.lastIndexOf(name)) throw new Error(`names the parameter "${name}" twice`);
  }
  return url;
}

/** The URL's host, without the brackets of an IPv6 address. */
export const transportHost = (url: URL) => url.hostname.replace(/^\[(.*)\]$/, '$1');

/** Parameter `name` as a whole number from `min` to `max`; `fallback` when absent or empty. */
export function wholeParam(url: URL, name: string, [min, max]: readonly [number, number], fallback: number): number {
  const value = url.searchParams.get(name);
  if (value === null || value === '') return fallback;
  if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max)
    throw new Error(`${name} must be a whole number from ${min} to ${max}, got "${value}"`);
  return Number(value);
}

/**
 * The PEM text of a transport URL's `ca=` (the certificates a next hop with a private CA must
 * chain to), read once at start, so a wrong path stops the start rather than every connection.
 * Throws an Error naming the fault (config.ts names the variable).
 */
export function readCaFile(path: string): string {
  let pem: string;
  try {
    pem = readFileSync(path, 'utf8');
  } catch (error) {
    throw new Error(`ca: cannot read "${path}" (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
  }
  if (!pem.includes('-----BEGIN CERTIFICATE-----')) throw new Error(`ca: "${path}" holds no PEM certificate`);
  return pem;
}
