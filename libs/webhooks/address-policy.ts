import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';
import type { OutboundPolicy } from '#libs/outbound';

// Webhook targets are URLs a tenant chose. Every connection to one goes through the service's
// outbound agent (libs/outbound: the address each connection is made to is checked when it is
// made, so a name resolving to a private address, DNS rebinding included, is refused). This is
// the look the API takes when an endpoint is saved, so a URL that could never be called is
// refused at once: an IP literal that is not a public unicast address (ipaddr.js classifies:
// loopback, private, link-local with the cloud metadata address, carrier-grade NAT, unique-local,
// multicast, reserved, ...), or `localhost`; loopback ones only where the policy allows them.

/** Why a URL's host is refused on its face, or null (host names are judged at connect time). */
export function hostRefusal(hostname: string, policy: OutboundPolicy): string | null {
  const bare = hostname.replace(/^\[(.*)\]$/, '$1').toLowerCase().replace(/\.$/, '');
  if (bare === 'localhost' || bare.endsWith('.localhost')) return policy.allowLoopback ? null : `${hostname} is a loopback address`;
  if (!isIP(bare)) return null;
  // An IPv4-mapped IPv6 address (::ffff:127.0.0.1) is judged as the IPv4 address it is.
  const range = ipaddr.process(bare).range();
  if (range === 'unicast' || (range === 'loopback' && policy.allowLoopback)) return null;
  return `${hostname} is not a public address (${range})`;
}
