import type { LookupAddress } from 'node:dns';
import { lookup } from 'node:dns/promises';
import { BlockList, isIP, type LookupFunction } from 'node:net';

/**
 * Address ranges a webhook must never reach unless WEBHOOK_ALLOW_PRIVATE=true: a customer
 * names the URL, so without this guard the service would post from inside the operator's
 * network (server-side request forgery). From the IANA special-purpose registries
 * (RFC 6890). BlockList also matches IPv4-mapped IPv6 (::ffff:127.0.0.1) against the IPv4
 * rules, so those need no entries of their own.
 */
const RANGES: Array<[category: string, cidrs: string[]]> = [
  ['"this network"', ['0.0.0.0/8', '::/128']],
  ['loopback', ['127.0.0.0/8', '::1/128']],
  ['private', ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16']], // RFC 1918
  ['carrier-grade NAT', ['100.64.0.0/10']], // RFC 6598
  // 169.254.169.254 is the cloud metadata service on AWS, GCP and Azure.
  ['link-local', ['169.254.0.0/16', 'fe80::/10']], // RFC 3927, RFC 4291
  ['unique-local', ['fc00::/7', 'fec0::/10']], // RFC 4193, and the deprecated site-local
  ['multicast', ['224.0.0.0/4', 'ff00::/8']],
  ['reserved', ['240.0.0.0/4']], // RFC 1112 §4, with the 255.255.255.255 broadcast
];

const GUARDS = RANGES.map(([category, cidrs]) => {
  const list = new BlockList();
  for (const cidr of cidrs) {
    const [network, prefix] = cidr.split('/');
    list.addSubnet(network, Number(prefix), isIP(network) === 6 ? 'ipv6' : 'ipv4');
  }
  return { category, list };
});

/** The kind of non-public range the address is in, or undefined for a public address. */
export function blockedCategory(address: string): string | undefined {
  const type = isIP(address) === 6 ? 'ipv6' : 'ipv4';
  return GUARDS.find((guard) => guard.list.check(address, type))?.category;
}

export type Resolver = (hostname: string) => Promise<LookupAddress[]>;

/** Every address of the host, as the operating system resolves it (hosts file included). */
export const systemResolver: Resolver = (hostname) => lookup(hostname, { all: true });

/** A URL the service will not post to; recorded on the delivery, never retried. */
export class RefusedDestination extends Error {}

/**
 * The addresses a webhook URL may be posted to. Every address of the host is checked, not
 * just the first: the connection may use any of them (Happy Eyeballs).
 */
export async function vetDestination(url: string, options: { allowPrivate: boolean; resolve: Resolver }): Promise<{ target: URL; addresses: LookupAddress[] }> {
  const target = URL.parse(url);
  if (!target) throw new RefusedDestination('refused: the webhook URL is not a valid URL');
  if (target.protocol !== 'http:' && target.protocol !== 'https:') {
    throw new RefusedDestination(`refused: webhook URLs must be http or https, not ${target.protocol.slice(0, -1)}`);
  }
  const host = target.hostname.replace(/^\[(.*)\]$/, '$1');
  const family = isIP(host);
  const addresses = family ? [{ address: host, family }] : await options.resolve(host);
  if (!options.allowPrivate) {
    for (const { address } of addresses) {
      const category = blockedCategory(address);
      if (category) {
        const where = address === host ? address : `${host} resolves to ${address}, which`;
        throw new RefusedDestination(`refused: ${where} is a ${category} address; webhooks are only posted to public addresses`);
      }
    }
  }
  return { target, addresses };
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
