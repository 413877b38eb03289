import { requireMembership, requirePermission } from "../organisations/organisations.server.ts";
import type { Role } from "../organisations/roles.server.ts";
import { recordAudit } from "../platform/audit.server.ts";
import { db } from "../platform/db.server.ts";
import { applyAccess, type ScimUserRow } from "./access.server.ts";

// The settings' group → role mapping (decision 0213): a SCIM group's display name (compared
// case-insensitively) gives its members a role; a person in several mapped groups gets the
// highest, one in none the default (access.server.ts). Owner is never given by a group.

export type MappableRole = Exclude<Role, "owner">;
export interface GroupRole {
  group: string;
  role: MappableRole;
}

export async function listGroupRoles(organisationId: string, personId: string) {
  await requireMembership(organisationId, personId);
  return groupRolesOf(organisationId);
}

export async function groupRolesOf(organisationId: string): Promise<GroupRole[]> {
  const rows = await db()<{ group_name: string; role: MappableRole }[]>`
    select group_name, role from scim_group_roles where organisation_id = ${organisationId}
    order by group_name`;
  return rows.map((r) => ({ group: r.group_name, role: r.role }));
}

/** Replaces the mapping and applies it to every provisioned person at once (members.manage). */
export async function setGroupRoles(
  organisationId: string,
  personId: string,
  mapping: GroupRole[],
): Promise<GroupRole[]> {
  await db().begin(async (t) => {
    await requirePermission(organisationId, personId, "members.manage", t);
    await t`delete from scim_group_roles where organisation_id = ${organisationId}`;
    for (const { group, role } of mapping) {
      await t`insert into scim_group_roles (organisation_id, group_name, role)
        values (${organisationId}, ${group.trim().toLowerCase()}, ${role})
        on conflict (organisation_id, group_name) do update set role = excluded.role`;
    }
    await recordAudit(
      {
        action: "scim.group_roles_changed",
        userId: organisationId,
        details: { groups: mapping.length },
      },
      t,
    );
    const users = await t<ScimUserRow[]>`
      select * from scim_users where organisation_id = ${organisationId} and active`;
    for (const user of users) await applyAccess(t, user);
  });
  return groupRolesOf(organisationId);
}
