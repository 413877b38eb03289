import type postgres from "postgres";
import type { User } from "../accounts/model.server.ts";
import { createUser, findUserByEmail, getUser } from "../accounts/users.server.ts";
import { organisationForEmailDomain } from "../organisations/domains.server.ts";
import { membershipOf, revokeOpenInvitations } from "../organisations/organisations.server.ts";
import type { Role } from "../organisations/roles.server.ts";
import { claimSeat, seatLimit, takesSeat } from "../organisations/seats.server.ts";
import { recordAudit } from "../platform/audit.server.ts";
import { db } from "../platform/db.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import type { SsoConnection } from "./connections.server.ts";
import { roleForGroups } from "./group-roles.server.ts";

// Signing in through an organisation's connection (decision 0210): the identity's account, else
// a new one (just in time), made a member of the organisation with the role its groups map to.
// The organisation's provider is trusted about its own people, not about the whole install: it
// never signs into an account it did not make or link, makes and links accounts only at the
// domains the organisation verified, and the address it gives is not taken as verified (so
// OPERATOR_EMAILS and email linking never follow from it).

export interface SsoProfile {
  /** Unique within the connection: `<issuer>#<sub>` (OIDC) or the NameID (SAML). */
  subject: string;
  email: string;
  name?: string | undefined;
  /** The groups the provider sent; null when it sent no groups attribute. */
  groups: string[] | null;
}

/** A sign-in the organisation's connection may not make; `reason` is the sign-in page's. */
export class SsoRefused extends DomainError {
  readonly reason: string;
  constructor(status: number, message: string, reason: string) {
    super(status, message);
    this.reason = reason;
  }
}

/**
 * Whether the organisation may link an identity to an existing account of `email`: only when it
 * has verified the address's domain (decision 0212), so it holds the mailbox anyway.
 */
export async function mayLinkByEmail(
  organisationId: string,
  email: string,
  t: postgres.TransactionSql,
): Promise<boolean> {
  return (await organisationForEmailDomain(email, t))?.organisationId === organisationId;
}

async function accountFor(
  t: postgres.TransactionSql,
  connection: SsoConnection,
  profile: SsoProfile,
): Promise<{ user: User; created: boolean }> {
  const org = connection.organisationId;
  const [linked] = await t<{ user_id: string }[]>`
    update sso_identities set email = ${profile.email}, groups = ${profile.groups},
      last_sign_in_at = now()
    where organisation_id = ${org} and subject = ${profile.subject}
    returning user_id`;
  if (linked) {
    const user = await getUser(linked.user_id, t);
    if (!user) throw new Error("SSO identity without its account");
    return { user, created: false };
  }
  const existing = await findUserByEmail(profile.email, t);
  if (existing) {
    // An account this organisation's sign-in already owns, under another subject (a transient
    // NameID, a changed issuer): the provider controls it already, so the new subject replaces
    // the old one.
    const [moved] = await t<{ user_id: string }[]>`
      update sso_identities set subject = ${profile.subject}, email = ${profile.email},
        groups = ${profile.groups}, last_sign_in_at = now()
      where organisation_id = ${org} and user_id = ${existing.id}
      returning user_id`;
    const user = moved && (await getUser(moved.user_id, t));
    if (user) return { user, created: false };
  }
  // Linking an existing account, or making a new one, needs the address's domain verified by
  // the organisation. A new account at any address would let an organisation's provider
  // pre-register someone else's email and keep a way in after its real owner takes the account
  // over by a password reset (account pre-hijacking); SCIM makes accounts on the same rule (0213).
  if (!(await mayLinkByEmail(org, profile.email, t))) {
    throw existing
      ? new SsoRefused(
          409,
          "An account with this email exists and is not linked to this organisation's sign-in",
          "sso_conflict",
        )
      : new SsoRefused(
          403,
          "This organisation's single sign-on makes accounts only at the email domains it has verified",
          "sso_domain",
        );
  }
  const user = existing
    ? await getUser(existing.id, t)
    : await createUser({ email: profile.email, name: profile.name, emailVerified: false }, t);
  if (!user) throw new Error("SSO account vanished");
  const [clash] = await t`select 1 from sso_identities
    where organisation_id = ${org} and user_id = ${user.id}`;
  if (clash) {
    throw new SsoRefused(409, "This account is linked to another identity", "sso_conflict");
  }
  await t`insert into sso_identities (organisation_id, subject, user_id, email, groups)
    values (${org}, ${profile.subject}, ${user.id}, ${profile.email}, ${profile.groups})`;
  return { user, created: !existing };
}

/** The member's role after this sign-in: the mapped one; owners stay owners. */
async function settleMembership(
  t: postgres.TransactionSql,
  connection: SsoConnection,
  user: User,
  groups: string[] | null,
): Promise<Role> {
  const org = connection.organisationId;
  const mapped = roleForGroups(connection.groupRoles, groups, connection.defaultRole);
  const current = (await membershipOf(org, user.id, t))?.role;
  // No groups sent: an existing member's role is left as the organisation set it.
  if (current === "owner" || (current && groups === null) || current === mapped) return current;
  if (takesSeat(mapped) && !(current && takesSeat(current))) {
    await claimSeat(t, org, await seatLimit(org), { countPending: true });
  }
  const actor = { type: "user" as const, id: user.id, userId: user.id };
  if (current) {
    await t`update organisation_members set role = ${mapped}
      where organisation_id = ${org} and user_id = ${user.id}`;
    await recordAudit(
      {
        action: "member.role_changed",
        actor,
        userId: org,
        target: user.id,
        details: { from: current, to: mapped, via: "sso" },
      },
      t,
    );
  } else {
    if (user.email) await revokeOpenInvitations(t, org, user.email);
    await t`insert into organisation_members (organisation_id, user_id, role, added_by)
      values (${org}, ${user.id}, ${mapped}, null)`;
    await recordAudit(
      {
        action: "member.added",
        actor,
        userId: org,
        target: user.id,
        details: { role: mapped, via: "sso" },
      },
      t,
    );
  }
  return mapped;
}

/** Signs `profile` in through the organisation's connection; audited on the account. */
export async function signInWithSso(connection: SsoConnection, profile: SsoProfile): Promise<User> {
  return db().begin(async (t) => {
    // A new account is audited (account.created) where it is made.
    const { user, created } = await accountFor(t, connection, profile);
    const role = await settleMembership(t, connection, user, profile.groups);
    const actor = { type: "user" as const, id: user.id, userId: user.id };
    await recordAudit(
      {
        action: "auth.signin",
        actor,
        details: {
          method: "sso",
          protocol: connection.protocol,
          organisation: connection.organisationId,
          role,
          created,
        },
      },
      t,
    );
    return user;
  }) as Promise<User>;
}
