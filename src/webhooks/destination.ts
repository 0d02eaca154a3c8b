import type { LookupAddress } from 'node:dns';
import { lookup } from 'node:dns/promises';
import { isIP, type LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';
import { Type } from 'typebox';
import { WEBHOOK_URL_MAX_LENGTH } from '../http/boundary.ts';

/**
 * What a webhook must never reach unless WEBHOOK_ALLOW_PRIVATE=true (alwaysRefused, below:
 * not even then): a customer names the URL, so without this guard the service would post
 * from inside the operator's network (server-side request forgery). ipaddr.js keeps the
 * IANA special-purpose registries (RFC 6890 and later) as named ranges; every range but
 * `unicast` is refused, those that embed an IPv4 address in IPv6 included (NAT64
 * 64:ff9b::/96, 6to4 2002::/16, Teredo), since the gateway that unwraps them may sit inside
 * the network. An IPv4-mapped address (::ffff:127.0.0.1) is judged as the IPv4 address it carries.
 */
const RANGE_WORDS: Record<string, string> = {
  unspecified: '"this network"',
  broadcast: 'broadcast',
  multicast: 'multicast',
  // 169.254.169.254 is the cloud metadata service on AWS, GCP and Azure.
  linkLocal: 'link-local',
  loopback: 'loopback',
  carrierGradeNat: 'carrier-grade NAT',
  private: 'private',
  uniqueLocal: 'unique-local',
  deprecatedSiteLocal: 'site-local',
  rfc6052: 'NAT64',
  rfc6145: 'IPv4-translated',
  '6to4': '6to4',
  teredo: 'Teredo',
  benchmarking: 'benchmarking',
  discard: 'discard-only',
};

/**
 * ::a.b.c.d, IPv4-compatible (RFC 4291 §2.5.5.1, deprecated), which ipaddr.js leaves unicast:
 * a host with an automatic tunnel (Linux's sit) still unwraps it, ::7f00:1 to 127.0.0.1.
 */
const IPV4_COMPATIBLE = ipaddr.parseCIDR('::/96');
/** NAT64's local-use prefix (RFC 8215), which operators split into /96s as the well-known one. */
const LOCAL_NAT64 = ipaddr.parseCIDR('64:ff9b:1::/48');
/** IPv4-translated addresses (RFC 2765, SIIT), which a stateless translator unwraps. */
const IPV4_TRANSLATED = ipaddr.parseCIDR('::ffff:0:0:0/96');

/** The kind of non-public range the address is in, or undefined for a public address. */
export function blockedCategory(address: string): string | undefined {
  let parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress())
    parsed = (parsed as ipaddr.IPv6).toIPv4Address();
  const range = parsed.range();
  if (range === 'unicast' && parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).match(IPV4_COMPATIBLE))
    return 'IPv4-compatible';
  if (range === 'unicast') return undefined;
  return RANGE_WORDS[range] ?? 'reserved';
}

/**
 * Refused whatever WEBHOOK_ALLOW_PRIVATE says (ARCHITECTURE.md, "Reads gain what was sent"):
 * the cloud metadata services, which hand whoever asks the host's credentials. Opening
 * private addresses for a development receiver must not open them. Link-local holds AWS's,
 * GCP's and Azure's 169.254.169.254; AWS's IPv6 one and Alibaba's are named; GCP's name is
 * refused before it is resolved.
 */
const METADATA_HOSTS = new Set(['metadata.google.internal']);
const METADATA_ADDRESSES = new Set(
  ['fd00:ec2::254', '100.100.100.200'].map((address) => ipaddr.parse(address).toNormalizedString()),
);

/**
 * The IPv4 address an IPv6 one carries where a gateway unwraps it: mapped (::ffff:a.b.c.d),
 * IPv4-compatible (::a.b.c.d), NAT64's well-known prefix (64:ff9b::/96, RFC 6052) and its
 * local-use one (64:ff9b:1::/48, RFC 8215, in its last 32 bits as a /96 of it carries them),
 * IPv4-translated (::ffff:0:a.b.c.d), 6to4 (2002:aabb:ccdd::/48, RFC 3056) and Teredo's client
 * (2001::/32, RFC 4380: its last 32 bits, inverted).
 */
function carriedIPv4(address: ipaddr.IPv6): ipaddr.IPv4 | undefined {
  if (address.isIPv4MappedAddress()) return address.toIPv4Address();
  const [, p1, p2, , , , p6, p7] = address.parts;
  const bytes = (high: number, low: number) => new ipaddr.IPv4([high >> 8, high & 255, low >> 8, low & 255]);
  if (address.match(IPV4_COMPATIBLE) || address.match(LOCAL_NAT64) || address.match(IPV4_TRANSLATED))
    return bytes(p6, p7);
  if (address.range() === 'teredo') return bytes(p6 ^ 0xffff, p7 ^ 0xffff);
  if (address.range() === 'rfc6052' && address.match(ipaddr.parseCIDR('64:ff9b::/96'))) return bytes(p6, p7);
  if (address.range() === '6to4') return bytes(p1, p2);
  return undefined;
}

/** Why the address is never posted to, or undefined when only the public-address rule decides. */
export function alwaysRefused(address: string): string | undefined {
  const parsed = ipaddr.parse(address);
  for (const candidate of [parsed, ...(parsed.kind() === 'ipv6' ? [carriedIPv4(parsed as ipaddr.IPv6)] : [])]) {
    if (candidate === undefined) continue;
    if (METADATA_ADDRESSES.has(candidate.toNormalizedString())) return 'a cloud metadata service address';
    if (candidate.range() === 'linkLocal') return 'a link-local address, where cloud metadata services answer';
  }
  return undefined;
}

export type Resolver = (hostname: string) => Promise<LookupAddress[]>;

/** How long a webhook host's lookup is waited for. */
export const LOOKUP_PATIENCE_MS = 2_000;

/**
 * `resolve`, given up on after `patienceMs` with an ETIMEOUT (a request's check then lets the URL
 * pass, and its delivery tries again later): getaddrinfo runs on libuv's few threads, and an
 * account whose hosts' DNS never answers held every other account's lookups behind its own, for
 * 19 s a request here.
 */
export function patientResolver(resolve: Resolver, patienceMs: number): Resolver {
  return (hostname) => {
    let timer: NodeJS.Timeout | undefined;
    const givenUp = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const why = `looking up ${hostname} took more than ${patienceMs} ms`;
        reject(Object.assign(new Error(why), { code: 'ETIMEOUT' }));
      }, patienceMs);
    });
    return Promise.race([resolve(hostname), givenUp]).finally(() => clearTimeout(timer));
  };
}

/** Every address of the host, as the operating system resolves it (hosts file included). */
export const systemResolver: Resolver = (hostname) => lookup(hostname, { all: true });

/**
 * systemResolver as a request's check asks it, patient LOOKUP_PATIENCE_MS: a delivery waits as
 * long as the lookup takes, since a slow resolver (glibc retries after 5 s) is no failed attempt.
 */
export const requestResolver: Resolver = patientResolver(systemResolver, LOOKUP_PATIENCE_MS);

const NEVER = '; webhooks are never posted there, whatever WEBHOOK_ALLOW_PRIVATE says';
const ONLY_PUBLIC = '; webhooks are only posted to public addresses (unless the service sets WEBHOOK_ALLOW_PRIVATE)';

/** A URL the service will not post to; recorded on the delivery, never retried. */
export class RefusedDestination extends Error {}

export interface DestinationOptions {
  allowPrivate: boolean;
  resolve: Resolver;
}

/**
 * The addresses a webhook URL may be posted to. Every address of the host is checked, not
 * just the first: the connection may use any of them (Happy Eyeballs).
 */
export async function vetDestination(
  url: string,
  options: DestinationOptions,
): Promise<{ target: URL; addresses: LookupAddress[] }> {
  const target = URL.parse(url);
  if (!target) throw new RefusedDestination('refused: the webhook URL is not a valid URL');
  if (target.protocol !== 'http:' && target.protocol !== 'https:') {
    throw new RefusedDestination(`refused: webhook URLs must be http or https, not ${target.protocol.slice(0, -1)}`);
  }
  // Node's client takes port 0 for the scheme's default: the post would go to another receiver than named.
  if (target.port === '0') throw new RefusedDestination('refused: port 0 is no port to post to');
  const host = target.hostname.replace(/^\[(.*)\]$/, '$1');
  if (METADATA_HOSTS.has(host.replace(/\.$/, ''))) {
    throw new RefusedDestination(`refused: ${host} is a cloud metadata service${NEVER}`);
  }
  const family = isIP(host);
  const addresses = family ? [{ address: host, family }] : await options.resolve(host);
  for (const { address } of addresses) {
    const where = address === host ? address : `${host} resolves to ${address}, which`;
    const never = alwaysRefused(address);
    if (never) throw new RefusedDestination(`refused: ${where} is ${never}${NEVER}`);
    const category = options.allowPrivate ? undefined : blockedCategory(address);
    if (category) throw new RefusedDestination(`refused: ${where} is a ${category} address${ONLY_PUBLIC}`);
  }
  return { target, addresses };
}

// getaddrinfo's answers for a name that does not exist (as opposed to a DNS server that
// did not answer, which may be over by delivery time).
const NO_SUCH_HOST = new Set(['ENOTFOUND', 'ENODATA', 'EAI_NONAME']);

/**
 * The check of a webhook URL field when a request names it, for every module's webhook
 * field: the reason the service would refuse to post there, or undefined. Delivery vets the
 * URL again (vetDestination), as a name may resolve elsewhere by then (DNS rebinding); a
 * name whose lookup fails for a reason other than "no such host" passes here and is
 * retried there.
 */
export async function webhookUrlRefusal(url: string, options: DestinationOptions): Promise<string | undefined> {
  try {
    await vetDestination(url, options);
    return undefined;
  } catch (error) {
    if (error instanceof RefusedDestination) return error.message.replace(/^refused: /, '');
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== undefined && NO_SUCH_HOST.has(code)) return `${URL.parse(url)?.hostname ?? url} has no address in DNS`;
    return undefined;
  }
}

/** How long a request's check of a webhook host holds (rememberedRefusals). */
const VERDICT_TTL_MS = 30_000;
const MAX_VERDICTS = 1000;

/**
 * webhookUrlRefusal, its verdict on each host remembered for 30 s: a client that names the
 * same status URL on every passcode had the host looked up on every request (getaddrinfo, on
 * libuv's thread pool: 3 % of a busy server's time). Only the request's check is remembered;
 * delivery vets the addresses again when it connects, so a host that moved meanwhile is
 * still refused there.
 */
export function rememberedRefusals(
  options: DestinationOptions,
  now: () => number,
): (url: string) => Promise<string | undefined> {
  const verdicts = new Map<string, { refusal: string | undefined; at: number }>();
  return async (url) => {
    const parsed = URL.parse(url);
    if (!parsed) return webhookUrlRefusal(url, options);
    const host = `${parsed.protocol}//${parsed.host}`;
    const known = verdicts.get(host);
    if (known && now() - known.at < VERDICT_TTL_MS) return known.refusal;
    const refusal = await webhookUrlRefusal(url, options);
    verdicts.delete(host);
    if (verdicts.size >= MAX_VERDICTS) verdicts.delete(verdicts.keys().next().value!);
    verdicts.set(host, { refusal, at: now() });
    return refusal;
  };
}

/**
 * A `lookup` for the connection that answers with the vetted addresses instead of asking
 * DNS again, so a name that resolves to a public address for the check and to a private
 * one for the connection (DNS rebinding) still reaches only what was checked.
 */
export function pinnedLookup(addresses: LookupAddress[]): LookupFunction {
  return (_hostname, options, callback) => {
    if (options.all) callback(null, addresses);
    else callback(null, addresses[0].address, addresses[0].family);
  };
}

/**
 * The schema of every module's webhook URL field (the CRM's `webhookUrl`, the spec's
 * `webHookUrl` for SMS and email): an http or https URL, which the HTTP boundary then vets
 * with webhookUrlRefusal because of its `x-webhook-url` annotation.
 */
export const WebhookUrl = (description: string) =>
  Type.String({
    format: 'uri',
    pattern: '^[Hh][Tt][Tt][Pp][Ss]?://',
    maxLength: WEBHOOK_URL_MAX_LENGTH,
    description,
    errorMessage: `must be an http or https URL of at most ${WEBHOOK_URL_MAX_LENGTH} characters`,
    'x-webhook-url': true,
  });
