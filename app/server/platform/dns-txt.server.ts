import { Resolver } from "node:dns/promises";
import { env } from "./env.server.ts";

// TXT lookups behind one small interface (issue 49, decision 0212): the domain verification asks
// through `TxtLookup`, so a test passes its own or points DNS_RESOLVER at a DNS server on loopback.

/** The TXT records at `name`, each as the strings it is made of; [] when there are none. */
export type TxtLookup = (name: string) => Promise<string[][]>;

/** No such name or no TXT record there: not an error, an answer with no records. */
const NO_RECORDS = new Set(["ENOTFOUND", "ENODATA", "NXDOMAIN"]);

/** The default lookup: node:dns through DNS_RESOLVER's servers, or the system's. */
export const systemTxtLookup: TxtLookup = async (name) => {
  const resolver = new Resolver({ timeout: 5_000, tries: 2 });
  const servers = env().DNS_RESOLVER;
  if (servers) resolver.setServers(servers.split(",").map((s) => s.trim()));
  try {
    return await resolver.resolveTxt(name);
  } catch (error) {
    if (NO_RECORDS.has((error as { code?: string }).code ?? "")) return [];
    throw error;
  }
};
