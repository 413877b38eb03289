import type postgres from "postgres";
import { z } from "zod";
import { recordAudit } from "../platform/audit.server.ts";
import { db } from "../platform/db.server.ts";
import { applyAccess, type ScimUserRow } from "./access.server.ts";
import type { EqFilter } from "./filter.server.ts";
import { parseScim, ScimError } from "./http.server.ts";
import { isScimId, listPage, metaOf, reference } from "./resource.server.ts";
import { GROUP_SCHEMA } from "./schema.server.ts";
import type { PatchOperation } from "./user-input.server.ts";

// SCIM Groups (RFC 7643 §4.2, decision 0213): kept so their members' roles follow the settings'
// group → role mapping; every change to a group's members or name re-applies its members' access.

type Sql = postgres.TransactionSql;

interface GroupRow {
  id: string;
  organisation_id: string;
  display_name: string;
  external_id: string | null;
  created_at: Date;
  updated_at: Date;
}

const notFound = () => new ScimError(404, "Group not found");

const memberRef = z.object({ value: z.string().max(64) });
export const scimGroupSchema = z.object({
  displayName: z.string().trim().min(1, "is required").max(200),
  externalId: z.string().trim().max(255).nullish(),
  members: z.array(memberRef).max(10_000).nullish(),
});
export type ScimGroupInput = z.infer<typeof scimGroupSchema>;

async function representation(row: GroupRow, sql: postgres.Sql | Sql = db()) {
  const members = await sql<{ id: string; user_name: string }[]>`
    select u.id, u.user_name from scim_group_members gm join scim_users u on u.id = gm.scim_user_id
    where gm.group_id = ${row.id} order by u.user_name`;
  return {
    schemas: [GROUP_SCHEMA],
    id: row.id,
    displayName: row.display_name,
    ...(row.external_id ? { externalId: row.external_id } : {}),
    members: members.map((m) => reference("User", m.id, m.user_name)),
    meta: metaOf("Group", row),
  };
}

async function findRow(sql: postgres.Sql | Sql, organisationId: string, id: string) {
  if (!isScimId(id)) throw notFound();
  const [row] = await sql<GroupRow[]>`
    select * from scim_groups where id = ${id} and organisation_id = ${organisationId}`;
  if (!row) throw notFound();
  return row;
}

async function nameTaken(t: Sql, organisationId: string, name: string, except?: string) {
  const [row] = await t`select 1 from scim_groups
    where organisation_id = ${organisationId} and lower(display_name) = lower(${name})
      and id is distinct from ${except ?? null}::uuid`;
  if (row) throw new ScimError(409, `A group named ${name} exists`, "uniqueness");
}

/** The organisation's SCIM users among `ids` (another organisation's or unknown: 400). */
async function ownUsers(t: Sql, organisationId: string, ids: string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  if (!ids.every((id) => isScimId(id))) {
    throw new ScimError(400, "members: unknown user", "invalidValue");
  }
  const rows = await t<{ id: string }[]>`
    select id from scim_users where organisation_id = ${organisationId} and id = any(${ids}::uuid[])`;
  if (rows.length !== new Set(ids).size) {
    throw new ScimError(400, "members: unknown user", "invalidValue");
  }
  return rows.map((r) => r.id);
}

/** Re-applies access for these SCIM users (their groups changed). */
async function reapply(t: Sql, userIds: Iterable<string>) {
  const ids = [...new Set(userIds)];
  if (ids.length === 0) return;
  const users = await t<ScimUserRow[]>`select * from scim_users where id = any(${ids}::uuid[])`;
  for (const user of users) await applyAccess(t, user);
}

async function setMembers(t: Sql, groupId: string, add: string[], remove: string[]) {
  for (const id of add) {
    await t`insert into scim_group_members (group_id, scim_user_id) values (${groupId}, ${id})
      on conflict do nothing`;
  }
  if (remove.length > 0) {
    await t`delete from scim_group_members
      where group_id = ${groupId} and scim_user_id = any(${remove}::uuid[])`;
  }
}

async function currentMembers(t: Sql, groupId: string): Promise<string[]> {
  const rows = await t<{ scim_user_id: string }[]>`
    select scim_user_id from scim_group_members where group_id = ${groupId}`;
  return rows.map((r) => r.scim_user_id);
}

const audit = (t: Sql, organisationId: string, row: GroupRow, change: string) =>
  recordAudit(
    {
      action: "scim.group_changed",
      userId: organisationId,
      target: row.id,
      details: { displayName: row.display_name, change },
    },
    t,
  );

export async function createScimGroup(organisationId: string, input: ScimGroupInput) {
  return db().begin(async (t) => {
    await nameTaken(t, organisationId, input.displayName);
    const members = await ownUsers(
      t,
      organisationId,
      (input.members ?? []).map((m) => m.value),
    );
    const [row] = await t<GroupRow[]>`
      insert into scim_groups (organisation_id, display_name, external_id)
      values (${organisationId}, ${input.displayName}, ${input.externalId ?? null}) returning *`;
    await setMembers(t, row!.id, members, []);
    await reapply(t, members);
    await audit(t, organisationId, row!, "created");
    return representation(row!, t);
  });
}

export async function getScimGroup(organisationId: string, id: string) {
  return representation(await findRow(db(), organisationId, id));
}

export async function listScimGroups(
  organisationId: string,
  filter: EqFilter | undefined,
  startIndex: number,
  count: number,
) {
  const sql = db();
  const where = filter
    ? filter.attribute === "displayName"
      ? sql`and lower(display_name) = lower(${filter.value})`
      : sql`and external_id = ${filter.value}`
    : sql``;
  return listPage<GroupRow>("scim_groups", organisationId, where, { startIndex, count }, (row) =>
    representation(row),
  );
}

/** PUT: the group's name and members become the input's. */
export async function replaceScimGroup(organisationId: string, id: string, input: ScimGroupInput) {
  return db().begin(async (t) => {
    const row = await findRow(t, organisationId, id);
    await nameTaken(t, organisationId, input.displayName, id);
    const wanted = await ownUsers(
      t,
      organisationId,
      (input.members ?? []).map((m) => m.value),
    );
    const before = await currentMembers(t, id);
    await setMembers(
      t,
      id,
      wanted,
      before.filter((m) => !wanted.includes(m)),
    );
    const [updated] = await t<GroupRow[]>`
      update scim_groups set display_name = ${input.displayName},
        external_id = ${input.externalId ?? null}, updated_at = now()
      where id = ${id} returning *`;
    // A rename may change the role the group maps to: all of its members are re-applied.
    await reapply(t, [...before, ...wanted]);
    await audit(t, organisationId, updated ?? row, "replaced");
    return representation(updated!, t);
  });
}

const memberValues = (value: unknown): string[] =>
  parseScim(z.array(memberRef).max(10_000), Array.isArray(value) ? value : [value]).map(
    (m) => m.value,
  );

/** `members[value eq "<id>"]`: the member a remove names in its path. */
const MEMBER_PATH = /^members\[\s*value\s+eq\s+"([^"]+)"\s*\]$/i;

export async function patchScimGroup(
  organisationId: string,
  id: string,
  operations: PatchOperation[],
) {
  return db().begin(async (t) => {
    const row = await findRow(t, organisationId, id);
    const before = await currentMembers(t, id);
    let displayName = row.display_name;
    let externalId = row.external_id;
    for (const op of operations) {
      const path = op.path?.toLowerCase();
      const named = op.path ? MEMBER_PATH.exec(op.path) : null;
      if (named && op.op === "remove") {
        await setMembers(t, id, [], await ownUsers(t, organisationId, [named[1]!]));
      } else if (path === "members") {
        const ids = op.value === undefined ? [] : memberValues(op.value);
        if (op.op === "add") await setMembers(t, id, await ownUsers(t, organisationId, ids), []);
        else if (op.op === "remove") {
          // No value: every member goes (RFC 7644 §3.5.2.2).
          const gone = op.value === undefined ? await currentMembers(t, id) : ids;
          await setMembers(t, id, [], await ownUsers(t, organisationId, gone));
        } else {
          const wanted = await ownUsers(t, organisationId, ids);
          const now = await currentMembers(t, id);
          await setMembers(
            t,
            id,
            wanted,
            now.filter((m) => !wanted.includes(m)),
          );
        }
      } else if (path === "displayname" && op.op !== "remove") {
        displayName = parseScim(scimGroupSchema.shape.displayName, op.value);
      } else if (path === "externalid") {
        externalId = op.op === "remove" ? null : parseScim(z.string().max(255), op.value);
      } else if (!op.path && op.op !== "remove" && typeof op.value === "object" && op.value) {
        // Entra ID: {op: "replace", value: {id, displayName}}.
        const value = op.value as Record<string, unknown>;
        if (typeof value.displayName === "string") {
          displayName = parseScim(scimGroupSchema.shape.displayName, value.displayName);
        }
      } else {
        throw new ScimError(
          400,
          `Unsupported operation on ${op.path ?? "the group"}`,
          "invalidPath",
        );
      }
    }
    if (displayName !== row.display_name) await nameTaken(t, organisationId, displayName, id);
    const [updated] = await t<GroupRow[]>`
      update scim_groups set display_name = ${displayName}, external_id = ${externalId},
        updated_at = now()
      where id = ${id} returning *`;
    const after = await currentMembers(t, id);
    await reapply(t, [...before, ...after]);
    await audit(t, organisationId, updated!, "patched");
    return representation(updated!, t);
  });
}

export async function deleteScimGroup(organisationId: string, id: string): Promise<void> {
  await db().begin(async (t) => {
    const row = await findRow(t, organisationId, id);
    const members = await currentMembers(t, id);
    await t`delete from scim_groups where id = ${id}`;
    await reapply(t, members);
    await audit(t, organisationId, row, "deleted");
  });
}
