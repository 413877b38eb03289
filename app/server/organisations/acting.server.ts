import { toUser, type User, type UserRow } from "../accounts/model.server.ts";
import { db } from "../platform/db.server.ts";
import type { Role } from "./roles.server.ts";

// A person acting for an organisation: the organisation as an owner (its account, as the
// services read an owner) and the person's role there, in one read per request.

export async function organisationActing(
  organisationId: string,
  personId: string,
): Promise<{ organisation: User; role: Role } | undefined> {
  const [row] = await db()<(UserRow & { member_role: Role })[]>`
    select o.*, m.role as member_role
    from organisation_members m join users o on o.id = m.organisation_id
    where m.organisation_id = ${organisationId} and m.user_id = ${personId}
      and o.kind = 'organisation'`;
  if (!row) return undefined;
  const { member_role, ...organisation } = row;
  return { organisation: toUser(organisation), role: member_role };
}
