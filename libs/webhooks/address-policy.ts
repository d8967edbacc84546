import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

// Webhook targets are URLs a tenant chose. Called from inside the service's network, a URL could
// reach what only the service should: its own loopback services, private networks, a cloud's
// metadata endpoint (169.254.169.254, fd00:ec2::254). So only public unicast addresses are
// called, unless an operator lists a range (WEBHOOK_ALLOWED_CIDRS). ipaddr.js classifies: any
// range it does not call `unicast` (loopback, private, link-local, carrier-grade NAT, unique-local,
// multicast, reserved, the IPv6 forms that embed an IPv4 address, ...) is refused.

export class AddressPolicy {
  private readonly allowed: [ipaddr.IPv4 | ipaddr.IPv6, number][];

  constructor(allowedCidrs: readonly string[]) {
    this.allowed = allowedCidrs.map((cidr) => ipaddr.parseCIDR(cidr));
  }

  /** Why `address` (an IP) may not be called, or null when it may. */
  refusal(address: string): string | null {
    let ip: ipaddr.IPv4 | ipaddr.IPv6;
    try {
      // An IPv4-mapped IPv6 address (::ffff:127.0.0.1) is judged as the IPv4 address it is.
      ip = ipaddr.process(address.replace(/^\[(.*)\]$/, '$1'));
    } catch {
      return `${address} is not an IP address`;
    }
    if (this.allowed.some(([range, bits]) => range.kind() === ip.kind() && ip.match(range, bits))) return null;
    const range = ip.range();
    return range === 'unicast' ? null : `${address} is not a public address (${range})`;
  }

  /**
   * Whether a URL's host is refused before any lookup: an IP literal outside the policy, or a name
   * that is loopback by definition (`localhost`). Other names are judged by what they resolve to,
   * at each connection.
   */
  hostRefusal(hostname: string): string | null {
    const bare = hostname.replace(/^\[(.*)\]$/, '$1');
    if (isIP(bare)) return this.refusal(bare);
    const name = bare.toLowerCase().replace(/\.$/, '');
    if (name === 'localhost' || name.endsWith('.localhost')) return this.refusal('127.0.0.1');
    return null;
  }
}
