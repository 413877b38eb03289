import type { SsoRole } from "../../schemas/sso.ts";

// Which role an identity provider's groups give (decision 0210): the highest role of the groups
// that are mapped; none mapped (or no groups sent) gives the connection's default role.

const RANK: Record<SsoRole, number> = { admin: 4, member: 3, billing: 2, viewer: 1 };

export function roleForGroups(
  mapping: Record<string, SsoRole>,
  groups: readonly string[] | null,
  defaultRole: SsoRole,
): SsoRole {
  let best: SsoRole | undefined;
  for (const group of groups ?? []) {
    const role = Object.hasOwn(mapping, group) ? mapping[group] : undefined;
    if (role && (!best || RANK[role] > RANK[best])) best = role;
  }
  return best ?? defaultRole;
}
