import { recordAudit } from "../platform/audit.server.ts";
import { db } from "../platform/db.server.ts";
import { txExecutor } from "../platform/db-helpers.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { sendJob } from "../platform/jobs.server.ts";
import { organisationForEmailDomain } from "./domains.server.ts";

// Enforced single sign-on (issue 49, decision 0212). When an organisation requires SSO for a
// verified domain, people with an email at it sign in through the organisation's SSO only: the
// sign-in paths other than SSO ask `signInRefusal` first. The organisation's owners keep a
// break-glass password sign-in (for an identity provider that is down or misconfigured), which
// is audited on the organisation and mailed to its owners.

/** How someone is signing in; SSO itself is never refused here. */
export type SignInMethod = "password" | "oauth" | "wallet";

export interface Enforcement {
  organisationId: string;
  organisationName: string;
  domain: string;
  /** The person is an owner of the organisation: a password sign-in is a break-glass one. */
  owner: boolean;
}

export const ssoRequiredMessage = (e: Pick<Enforcement, "organisationName" | "domain">) =>
  `${e.organisationName} requires single sign-on for ${e.domain} addresses: use "Sign in with SSO" with your work email`;

/** The enforcement that applies to `email` (undefined: none), and whether `personId` owns it. */
export async function enforcementFor(
  email: string,
  personId: string | undefined,
): Promise<Enforcement | undefined> {
  const owner = await organisationForEmailDomain(email);
  if (!owner?.requireSso) return undefined;
  const [row] = personId
    ? await db()`
        select 1 from organisation_members
        where organisation_id = ${owner.organisationId} and user_id = ${personId} and role = 'owner'`
    : [];
  return {
    organisationId: owner.organisationId,
    organisationName: owner.organisationName,
    domain: owner.domain,
    owner: row !== undefined,
  };
}

/**
 * The refusal (403, pointing to SSO) of a sign-in by `method` under `enforcement`, or undefined
 * when it may go on. Only a password sign-in by an owner passes an enforced domain (break-glass).
 */
export function signInRefusal(
  enforcement: Enforcement | undefined,
  method: SignInMethod,
): DomainError | undefined {
  if (!enforcement) return undefined;
  if (method === "password" && enforcement.owner) return undefined;
  return new DomainError(403, ssoRequiredMessage(enforcement), { sso: true });
}

/** `signInRefusal` for an email and its account (undefined: no account yet). */
export async function refuseSignIn(
  email: string,
  personId: string | undefined,
  method: SignInMethod,
): Promise<DomainError | undefined> {
  return signInRefusal(await enforcementFor(email, personId), method);
}

/**
 * Registering by password signs the new account in: refused (403, pointing to SSO) for an email
 * at a domain that requires SSO. Such people get their account through SSO or SCIM.
 */
export async function assertPasswordSignUpAllowed(email: string): Promise<void> {
  const refused = await refuseSignIn(email, undefined, "password");
  if (refused) throw refused;
}

/**
 * Records a successful break-glass sign-in: on the organisation's audit log (its owners, admins
 * and billing managers read it) and in a mail to every owner, so a stolen owner password used
 * to get around SSO does not go unnoticed.
 */
export async function recordBreakGlass(
  enforcement: Enforcement,
  person: { id: string; email: string },
): Promise<void> {
  await db().begin(async (t) => {
    await recordAudit(
      {
        action: "auth.break_glass",
        userId: enforcement.organisationId,
        actor: { type: "user", id: person.id, userId: person.id },
        target: person.id,
        details: { method: "password", domain: enforcement.domain, email: person.email },
      },
      t,
    );
    const owners = await t<{ email: string }[]>`
      select u.email from organisation_members m join users u on u.id = m.user_id
      where m.organisation_id = ${enforcement.organisationId} and m.role = 'owner'
        and u.email is not null`;
    for (const { email } of owners) {
      await sendJob(
        "send-email",
        {
          to: email,
          subject: `Break-glass sign-in to ${enforcement.organisationName}`.slice(0, 200),
          text: [
            `${person.email} signed in with a password, bypassing the single sign-on that`,
            `${enforcement.organisationName} requires for ${enforcement.domain}.`,
            "",
            "Owners keep this way in for when the identity provider cannot be used. If nobody",
            "expected it, change that owner's password and review the organisation's audit log.",
          ].join("\n"),
        },
        { db: txExecutor(t) },
      );
    }
  });
}
