import { isIP } from "node:net";

// The one key every per-address rate limit counts under (docs/decisions/0196). An IPv4 client is
// its address. An IPv6 client is its /64: a subscriber, a host or a cloud VM is routinely given a
// whole /64 and can pick any of its 2^64 addresses per request, so keying on the exact address
// let one client walk around every per-IP limit. An IPv4-mapped IPv6 address (::ffff:a.b.c.d, in
// either spelling) is the IPv4 client it maps.

/** The eight 16-bit groups of an IPv6 address (assumed valid: `isIP(ip) === 6`). */
function groups(ip: string): number[] {
  let text = ip.split("%")[0]!; // a zone id (fe80::1%eth0) is no part of the address
  // A dotted IPv4 tail (::ffff:192.0.2.1) is two groups spelled differently.
  const dotted = text.match(/(\d+)\.(\d+)\.(\d+)\.(\d+)$/);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    const hex = (hi: number, lo: number) => ((hi << 8) | lo).toString(16);
    text = `${text.slice(0, -dotted[0].length)}${hex(a, b)}:${hex(c, d)}`;
  }
  const parse = (part: string) => (part ? part.split(":").map((h) => Number.parseInt(h, 16)) : []);
  const [head = "", rest] = text.split("::");
  const left = parse(head);
  const right = parse(rest ?? "");
  const zeros = rest === undefined ? 0 : 8 - left.length - right.length;
  return [...left, ...Array<number>(zeros).fill(0), ...right];
}

/** The address a per-address limit counts: IPv4 as is, IPv6 as its /64 ("2001:db8:1:2::/64"). */
export function limitedAddress(ip: string): string {
  if (isIP(ip) !== 6) return ip; // IPv4, or "unknown": counted as given
  const g = groups(ip);
  const mapped = g.slice(0, 5).every((x) => x === 0) && g[5] === 0xffff;
  if (mapped) return [g[6]! >> 8, g[6]! & 0xff, g[7]! >> 8, g[7]! & 0xff].join(".");
  return `${g
    .slice(0, 4)
    .map((x) => x.toString(16))
    .join(":")}::/64`;
}

/** The rate-limit key of a client address. */
export const addressKey = (ip: string) => `ip:${limitedAddress(ip)}`;
