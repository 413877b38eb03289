import type postgres from "postgres";
import { createUser, findUserByEmail } from "../accounts/users.server.ts";
import { emailDomain, verifiedDomainsOf } from "../organisations/domains.server.ts";
import { recordAudit } from "../platform/audit.server.ts";
import { db } from "../platform/db.server.ts";
import { applyAccess, type ScimUserRow } from "./access.server.ts";
import type { EqFilter } from "./filter.server.ts";
import { ScimError } from "./http.server.ts";
import { isScimId, listPage, metaOf, reference } from "./resource.server.ts";
import { USER_SCHEMA } from "./schema.server.ts";
import type { UserDraft } from "./user-input.server.ts";

// SCIM Users (RFC 7643 §4.1, decision 0213): the people an organisation's identity provider
// provisions. Creating one links the account of the same email, or makes an account when the
// email is at one of the organisation's verified domains; its membership follows `active` and
// the groups (access.server.ts).

type Sql = postgres.TransactionSql;

interface AccountRow {
  email: string;
  name: string;
}

const notFound = () => new ScimError(404, "User not found");

async function representation(row: ScimUserRow, sql: postgres.Sql | Sql = db()) {
  const [account] = await sql<
    AccountRow[]
  >`select email, name from users where id = ${row.user_id}`;
  const groups = await sql<{ id: string; display_name: string }[]>`
    select g.id, g.display_name from scim_group_members gm join scim_groups g on g.id = gm.group_id
    where gm.scim_user_id = ${row.id} order by g.display_name`;
  return {
    schemas: [USER_SCHEMA],
    id: row.id,
    ...(row.external_id ? { externalId: row.external_id } : {}),
    userName: row.user_name,
    name: {
      ...(row.given_name ? { givenName: row.given_name } : {}),
      ...(row.family_name ? { familyName: row.family_name } : {}),
    },
    displayName: account?.name ?? row.user_name,
    emails: account ? [{ value: account.email, type: "work", primary: true }] : [],
    active: row.active,
    groups: groups.map((g) => reference("Group", g.id, g.display_name)),
    meta: metaOf("User", row),
  };
}
export type ScimUser = Awaited<ReturnType<typeof representation>>;

async function findRow(sql: postgres.Sql | Sql, organisationId: string, id: string, lock = false) {
  if (!isScimId(id)) throw notFound();
  const [row] = lock
    ? await sql<ScimUserRow[]>`select * from scim_users
        where id = ${id} and organisation_id = ${organisationId} for update`
    : await sql<ScimUserRow[]>`select * from scim_users
        where id = ${id} and organisation_id = ${organisationId}`;
  if (!row) throw notFound();
  return row;
}

async function userNameTaken(t: Sql, organisationId: string, userName: string, except?: string) {
  const [row] = await t`select 1 from scim_users
    where organisation_id = ${organisationId} and lower(user_name) = lower(${userName})
      and id is distinct from ${except ?? null}::uuid`;
  if (row) throw new ScimError(409, `userName ${userName} is already provisioned`, "uniqueness");
}

const accountName = (d: UserDraft) =>
  d.displayName ?? ([d.givenName, d.familyName].filter(Boolean).join(" ") || undefined);

/** The email an account is found or made by: the primary email, else a userName that is one. */
function emailOf(draft: UserDraft): string {
  const email = draft.email ?? (/^[^@\s]+@[^@\s]+$/.test(draft.userName) ? draft.userName : null);
  if (!email) {
    throw new ScimError(
      400,
      "An email is required (emails, or a userName that is one)",
      "invalidValue",
    );
  }
  return email.toLowerCase();
}

export async function createScimUser(organisationId: string, draft: UserDraft): Promise<ScimUser> {
  const email = emailOf(draft);
  return db().begin(async (t) => {
    await userNameTaken(t, organisationId, draft.userName);
    const existing = await findUserByEmail(email, t);
    let userId: string;
    if (existing) {
      const [linked] = await t`select 1 from scim_users
        where organisation_id = ${organisationId} and user_id = ${existing.id}`;
      if (linked) {
        throw new ScimError(409, `The account of ${email} is already provisioned`, "uniqueness");
      }
      userId = existing.id;
    } else {
      const domains = await verifiedDomainsOf(organisationId, t);
      if (!domains.includes(emailDomain(email) ?? "")) {
        throw new ScimError(
          400,
          `New accounts are made only at the organisation's verified domains (${domains.join(", ") || "none yet"}); an account that exists is linked by its email`,
          "invalidValue",
        );
      }
      // The domain is the organisation's, proven by DNS: its addresses count as verified.
      userId = (await createUser({ email, name: accountName(draft), emailVerified: true }, t)).id;
    }
    const [row] = await t<ScimUserRow[]>`
      insert into scim_users (organisation_id, user_id, user_name, external_id, given_name,
        family_name, active, created_account)
      values (${organisationId}, ${userId}, ${draft.userName}, ${draft.externalId},
        ${draft.givenName}, ${draft.familyName}, ${draft.active}, ${!existing})
      returning *`;
    await applyAccess(t, row!);
    await recordAudit(
      {
        action: "scim.user_provisioned",
        userId: organisationId,
        target: userId,
        details: { userName: draft.userName, linked: Boolean(existing), active: draft.active },
      },
      t,
    );
    return representation(row!, t);
  });
}

export async function getScimUser(organisationId: string, id: string): Promise<ScimUser> {
  return representation(await findRow(db(), organisationId, id));
}

/** The draft a PATCH starts from. */
export async function scimUserDraft(organisationId: string, id: string): Promise<UserDraft> {
  const row = await findRow(db(), organisationId, id);
  const [account] = await db()<
    AccountRow[]
  >`select email, name from users where id = ${row.user_id}`;
  return {
    userName: row.user_name,
    externalId: row.external_id,
    givenName: row.given_name,
    familyName: row.family_name,
    displayName: account?.name ?? null,
    email: account?.email ?? null,
    active: row.active,
  };
}

export async function listScimUsers(
  organisationId: string,
  filter: EqFilter | undefined,
  startIndex: number,
  count: number,
) {
  const sql = db();
  const where = filter
    ? filter.attribute === "userName"
      ? sql`and lower(user_name) = lower(${filter.value})`
      : filter.attribute === "externalId"
        ? sql`and external_id = ${filter.value}`
        : sql`and user_id in (select id from users where lower(email) = lower(${filter.value}))`
    : sql``;
  return listPage<ScimUserRow>("scim_users", organisationId, where, { startIndex, count }, (row) =>
    representation(row),
  );
}

/** PUT and PATCH: the resource becomes `draft`; access follows at once. */
export async function updateScimUser(
  organisationId: string,
  id: string,
  draft: UserDraft,
): Promise<ScimUser> {
  return db().begin(async (t) => {
    const row = await findRow(t, organisationId, id, true);
    if (draft.userName.toLowerCase() !== row.user_name.toLowerCase()) {
      await userNameTaken(t, organisationId, draft.userName, id);
    }
    // An account SCIM made is the organisation's to name and re-address; a linked one is its
    // person's (decision 0213).
    if (row.created_account) {
      const name = accountName(draft);
      if (name)
        await t`update users set name = ${name}, updated_at = now() where id = ${row.user_id}`;
      if (draft.email) await changeEmail(t, organisationId, row.user_id, draft.email);
    }
    const [updated] = await t<ScimUserRow[]>`
      update scim_users set user_name = ${draft.userName}, external_id = ${draft.externalId},
        given_name = ${draft.givenName}, family_name = ${draft.familyName},
        active = ${draft.active}, updated_at = now()
      where id = ${id} returning *`;
    await applyAccess(t, updated!);
    if (updated!.active !== row.active) {
      await recordAudit(
        {
          action: updated!.active ? "scim.user_reactivated" : "scim.user_deactivated",
          userId: organisationId,
          target: row.user_id,
          details: { userName: updated!.user_name },
        },
        t,
      );
    } else {
      await recordAudit(
        { action: "scim.user_changed", userId: organisationId, target: row.user_id },
        t,
      );
    }
    return representation(updated!, t);
  });
}

async function changeEmail(t: Sql, organisationId: string, userId: string, email: string) {
  const [current] = await t<{ email: string }[]>`select email from users where id = ${userId}`;
  if (current?.email.toLowerCase() === email.toLowerCase()) return;
  if (!(await verifiedDomainsOf(organisationId, t)).includes(emailDomain(email) ?? "")) {
    throw new ScimError(
      400,
      "The email must be at one of the organisation's verified domains",
      "invalidValue",
    );
  }
  if (await findUserByEmail(email, t)) {
    throw new ScimError(409, `Another account has the email ${email}`, "uniqueness");
  }
  await t`update users set email = ${email}, email_verified = true, updated_at = now()
    where id = ${userId}`;
}

/**
 * DELETE: the person's access ends as on deactivation (an account SCIM made stays suspended,
 * its data kept for an operator), and the resource is gone.
 */
export async function deleteScimUser(organisationId: string, id: string): Promise<void> {
  await db().begin(async (t) => {
    const row = await findRow(t, organisationId, id, true);
    await applyAccess(t, { ...row, active: false });
    await t`delete from scim_users where id = ${id}`;
    await recordAudit(
      {
        action: "scim.user_deleted",
        userId: organisationId,
        target: row.user_id,
        details: { userName: row.user_name },
      },
      t,
    );
  });
}
