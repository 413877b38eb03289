import { BlockList, isIP } from "node:net";
import { env } from "./env.server.ts";

let cache: { source: string; list: BlockList } | undefined;

function trusted(): BlockList {
  const source = env().TRUSTED_PROXIES;
  if (cache?.source === source) return cache.list;
  const list = new BlockList();
  for (const entry of source
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)) {
    const [address = "", prefix] = entry.split("/");
    const family = isIP(address) === 6 ? "ipv6" : "ipv4";
    if (!isIP(address)) throw new Error(`TRUSTED_PROXIES: not an IP address or CIDR: ${entry}`);
    if (prefix === undefined) list.addAddress(address, family);
    else list.addSubnet(address, Number(prefix), family);
  }
  cache = { source, list };
  return list;
}

// "::ffff:192.0.2.1" is the IPv4 client 192.0.2.1; the hex spelling (::ffff:c000:201) stays as
// it is here (stripping its prefix would leave no address) and is mapped by the limit key.
const normalise = (ip: string) =>
  ip.startsWith("::ffff:") && isIP(ip.slice(7)) === 4 ? ip.slice(7) : ip;

function isTrusted(ip: string): boolean {
  const family = isIP(ip);
  if (!family) return false;
  return trusted().check(ip, family === 6 ? "ipv6" : "ipv4");
}

/** Whether a socket's peer is a configured trusted proxy (its X-Forwarded-For, X-Request-Id count). */
export function isTrustedPeer(remoteAddress: string | undefined): boolean {
  return remoteAddress !== undefined && isTrusted(normalise(remoteAddress));
}

/**
 * The client's address: the socket's peer, or — only when that peer is a configured trusted
 * proxy — the right-most address in X-Forwarded-For that is not itself a trusted proxy.
 */
export function clientIp(request: Request, remoteAddress: string | undefined): string {
  let ip = normalise(remoteAddress ?? "unknown");
  if (!isTrusted(ip)) return ip;
  const forwarded = (request.headers.get("x-forwarded-for") ?? "")
    .split(",")
    .map((s) => normalise(s.trim()))
    .filter((s) => isIP(s));
  for (let i = forwarded.length - 1; i >= 0; i--) {
    ip = forwarded[i]!;
    if (!isTrusted(ip)) return ip;
  }
  return ip;
}
