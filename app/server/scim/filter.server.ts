import { ScimError } from "./http.server.ts";

// The one filter form identity providers send for provisioning (RFC 7644 §3.4.2.2):
// `<attribute> eq "<value>"`, on the attributes a resource type allows. Anything else is 400
// invalidFilter, never a silently unfiltered list.

export interface EqFilter {
  attribute: string;
  value: string;
}

const EQ = /^\s*([A-Za-z][\w.]*)\s+eq\s+"((?:[^"\\]|\\.)*)"\s*$/i;

export function parseFilter(
  filter: string | null,
  allowed: readonly string[],
): EqFilter | undefined {
  if (filter === null || filter.trim() === "") return undefined;
  const match = EQ.exec(filter);
  const attribute = allowed.find((a) => a.toLowerCase() === match?.[1]?.toLowerCase());
  if (!match || !attribute) {
    throw new ScimError(
      400,
      `Unsupported filter: only ${allowed.map((a) => `${a} eq "…"`).join(", ")}`,
      "invalidFilter",
    );
  }
  return { attribute, value: match[2]!.replace(/\\(.)/g, "$1") };
}

/** startIndex (1-based) and count of a list request (RFC 7644 §3.4.2.4), bounded. */
export function paging(url: URL): { startIndex: number; count: number } {
  const start = Number.parseInt(url.searchParams.get("startIndex") ?? "1", 10);
  const count = Number.parseInt(url.searchParams.get("count") ?? "100", 10);
  return {
    startIndex: Number.isFinite(start) && start > 1 ? start : 1,
    count: Number.isFinite(count) ? Math.min(Math.max(count, 0), 200) : 100,
  };
}

export const LIST_SCHEMA = "urn:ietf:params:scim:api:messages:2.0:ListResponse";

export const listResponse = (
  resources: unknown[],
  total: number,
  startIndex: number,
): Record<string, unknown> => ({
  schemas: [LIST_SCHEMA],
  totalResults: total,
  startIndex,
  itemsPerPage: resources.length,
  Resources: resources,
});
