import ipaddr from 'ipaddr.js';

/**
 * The client a request counts against in a throttle: its IPv4 address, or the /64 of its IPv6
 * address. One subscriber's line or host is given a whole /64 (RFC 6177, RFC 7934), so
 * counting single IPv6 addresses would let one client try 2^64 times over. An IPv4-mapped
 * address (::ffff:192.0.2.1, what a dual-stack socket reports) counts as its IPv4 address.
 * Anything that is not an address (a proxy's odd X-Forwarded-For) counts as itself.
 */
export function clientGroup(address: string): string {
  if (!ipaddr.isValid(address)) return address;
  const parsed = ipaddr.process(address);
  if (parsed.kind() === 'ipv4') return parsed.toString();
  const prefix = (parsed as ipaddr.IPv6).parts.slice(0, 4).map((part) => part.toString(16));
  return `${prefix.join(':')}::/64`;
}
