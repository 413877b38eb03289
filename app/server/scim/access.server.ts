import type postgres from "postgres";
import { credentialCache } from "../accounts/credential-cache.server.ts";
import { revokeAllSessions } from "../accounts/sessions.server.ts";
import type { Role } from "../organisations/roles.server.ts";
import { claimSeat, seatLimit, takesSeat } from "../organisations/seats.server.ts";
import { recordAudit } from "../platform/audit.server.ts";
import { ScimError } from "./http.server.ts";

// What a provisioned person may do in the organisation, made to match the SCIM resource after
// every change (decision 0213): active → a member with the role their groups map to (owners are
// left as they are); inactive → no membership, so every session, key and open socket of theirs
// loses the organisation at once (the membership's NOTIFY, decision 0198); and an account SCIM
// made itself is suspended and its sessions revoked, so it stops working altogether.

export interface ScimUserRow {
  id: string;
  organisation_id: string;
  user_id: string;
  user_name: string;
  external_id: string | null;
  given_name: string | null;
  family_name: string | null;
  active: boolean;
  created_account: boolean;
  created_at: Date;
  updated_at: Date;
}

/** Why SCIM suspended an account (users.suspended_reason): only SCIM lifts its own. */
export const scimSuspension = (organisationId: string) => `scim:${organisationId}`;

/** Most to least: a person in several mapped groups gets the first role of this list they have. */
const RANK: readonly Role[] = ["admin", "member", "billing", "viewer"];
/** The role of a provisioned person in no mapped group. */
export const DEFAULT_ROLE: Role = "member";

export async function mappedRole(
  t: postgres.TransactionSql,
  organisationId: string,
  scimUserId: string,
): Promise<Role> {
  const rows = await t<{ role: Role }[]>`
    select r.role from scim_group_members gm
    join scim_groups g on g.id = gm.group_id
    join scim_group_roles r
      on r.organisation_id = g.organisation_id and r.group_name = lower(g.display_name)
    where gm.scim_user_id = ${scimUserId} and g.organisation_id = ${organisationId}`;
  const roles = new Set(rows.map((r) => r.role));
  return RANK.find((role) => roles.has(role)) ?? DEFAULT_ROLE;
}

/** Brings the person's membership (and, for an account SCIM made, the account) in line. */
export async function applyAccess(t: postgres.TransactionSql, user: ScimUserRow): Promise<void> {
  const organisationId = user.organisation_id;
  const [member] = await t<{ role: Role }[]>`
    select role from organisation_members
    where organisation_id = ${organisationId} and user_id = ${user.user_id} for update`;
  if (member?.role === "owner") {
    // Owners are managed in the platform (and keep the break-glass sign-in): SCIM never
    // removes one or changes their role.
    if (!user.active) {
      throw new ScimError(
        409,
        "This person is an owner of the organisation: owners are managed in the platform, not deactivated through SCIM",
        "mutability",
      );
    }
    return;
  }
  if (!user.active) {
    if (member) {
      await t`delete from organisation_members
        where organisation_id = ${organisationId} and user_id = ${user.user_id}`;
      await recordAudit(
        {
          action: "member.removed",
          userId: organisationId,
          target: user.user_id,
          details: { role: member.role, via: "scim" },
        },
        t,
      );
    }
    if (user.created_account) {
      const suspended = await t`
        update users set suspended_at = now(), suspended_reason = ${scimSuspension(organisationId)},
          updated_at = now()
        where id = ${user.user_id} and suspended_at is null returning id`;
      await revokeAllSessions(user.user_id, t);
      credentialCache()?.forgetUser(user.user_id);
      if (suspended.length > 0) {
        await recordAudit(
          { action: "user.suspended", userId: user.user_id, details: { via: "scim" } },
          t,
        );
      }
    }
    return;
  }
  if (user.created_account) {
    const lifted = await t`
      update users set suspended_at = null, suspended_reason = null, updated_at = now()
      where id = ${user.user_id} and suspended_reason = ${scimSuspension(organisationId)}
      returning id`;
    if (lifted.length > 0) {
      await recordAudit(
        { action: "user.unsuspended", userId: user.user_id, details: { via: "scim" } },
        t,
      );
    }
  }
  const role = await mappedRole(t, organisationId, user.id);
  if (member?.role === role) return;
  if (takesSeat(role) && !(member && takesSeat(member.role))) {
    await claimSeat(t, organisationId, await seatLimit(organisationId), { countPending: true });
  }
  if (!member) {
    await t`insert into organisation_members (organisation_id, user_id, role)
      values (${organisationId}, ${user.user_id}, ${role})`;
    await recordAudit(
      {
        action: "member.added",
        userId: organisationId,
        target: user.user_id,
        details: { role, via: "scim" },
      },
      t,
    );
    return;
  }
  await t`update organisation_members set role = ${role}
    where organisation_id = ${organisationId} and user_id = ${user.user_id}`;
  await recordAudit(
    {
      action: "member.role_changed",
      userId: organisationId,
      target: user.user_id,
      details: { from: member.role, to: role, via: "scim" },
    },
    t,
  );
}
