import { getFormProps, getSelectProps, useForm } from "@conform-to/react";
import { getZodConstraint, parseWithZod } from "@conform-to/zod/v4";
import { type LoaderFunctionArgs, type MetaFunction, redirect } from "@remix-run/node";
import { Form, useActionData, useLoaderData } from "@remix-run/react";
import { z } from "zod";
import { Card, Errors, Field, Notice, Submit } from "../components/forms.tsx";
import { OrganisationBilling } from "../components/organisation-billing.tsx";
import { OrganisationBranding } from "../components/organisation-branding.tsx";
import { MissionControl } from "../components/organisation-overview.tsx";
import { OrganisationDomains, OrganisationScim } from "../components/organisation-sso.tsx";
import { OrganisationSso } from "../components/organisation-sso-connection.tsx";
import { domainName } from "../schemas/domains.ts";
import { brandingFormSchema, newMemberSchema, roleSchema } from "../schemas/organisations.ts";
import { groupRolesText } from "../schemas/scim.ts";
import { ssoConnectionSchema, ssoFormSchema, ssoInputFromForm } from "../schemas/sso.ts";
import { requirePageSession, signedIn } from "../server/accounts/pages.server.ts";
import { getUser } from "../server/accounts/users.server.ts";
import { planIds } from "../server/billing/catalog.server.ts";
import { createCheckout } from "../server/billing/checkout.server.ts";
import { setPaidSeats } from "../server/billing/seat-purchase.server.ts";
import { currentPlanSubscription } from "../server/billing/subscriptions.server.ts";
import { billingContactOf } from "../server/organisations/billing-contact.server.ts";
import { brandingOf, setBranding } from "../server/organisations/branding.server.ts";
import {
  addDomain,
  listDomains,
  removeDomain,
  verifyDomain,
} from "../server/organisations/domains.server.ts";
import {
  inviteMember,
  listInvitations,
  revokeInvitation,
} from "../server/organisations/invitations.server.ts";
import {
  addMember,
  changeRole,
  listMembers,
  membershipOf,
  removeMember,
  requirePermission,
} from "../server/organisations/organisations.server.ts";
import { organisationOverview } from "../server/organisations/overview.server.ts";
import { deleteOrganisation, transferOwnership } from "../server/organisations/ownership.server.ts";
import { allows, ROLES } from "../server/organisations/roles.server.ts";
import { seatsOf } from "../server/organisations/seats.server.ts";
import { db } from "../server/platform/db.server.ts";
import { DomainError } from "../server/platform/errors.server.ts";
import { formAction } from "../server/platform/form-action.server.ts";
import { groupRolesOf, setGroupRoles } from "../server/scim/group-roles.server.ts";
import { scimBase } from "../server/scim/schema.server.ts";
import { createScimToken, revokeScimToken, scimTokenInfo } from "../server/scim/tokens.server.ts";
import {
  removeSsoConnection,
  requireSsoForDomain,
  setSsoConnection,
  ssoSettingsOf,
} from "../server/sso/connections.server.ts";

export const meta: MetaFunction<typeof loader> = ({ data }) => [
  { title: `${data?.organisation.name ?? "Organisation"} — Agent Platform` },
];

export async function loader({ request, params }: LoaderFunctionArgs) {
  const { user } = await requirePageSession(request);
  const id = params.id ?? "";
  const membership = await membershipOf(id, user.id);
  if (!membership) throw new Response("Organisation not found", { status: 404 });
  return {
    organisation: membership.organisation,
    role: membership.role,
    manages: allows(membership.role, "members.manage"),
    members: await listMembers(id, user.id),
    invitations: allows(membership.role, "members.manage")
      ? await listInvitations(id, user.id)
      : [],
    seats: await seatsOf(id),
    branding: await brandingOf(id, user.id),
    overview: await organisationOverview(id, user.id),
    sso: allows(membership.role, "members.manage") ? await ssoSettingsOf(id, user.id) : null,
    domains: await listDomains(id, user.id),
    scim: allows(membership.role, "members.manage")
      ? { baseUrl: scimBase(), token: await scimTokenInfo(id), groupRoles: await groupRolesOf(id) }
      : null,
    billing: allows(membership.role, "billing.manage")
      ? {
          contact: (await billingContactOf(id)) ?? null,
          subscribed: Boolean(await currentPlanSubscription(id)),
        }
      : null,
    me: user.id,
  };
}

const schema = z.discriminatedUnion("intent", [
  newMemberSchema.extend({ intent: z.literal("add") }),
  newMemberSchema.extend({ intent: z.literal("invite") }),
  z.object({ intent: z.literal("revoke"), invitationId: z.string().max(64) }),
  z.object({ intent: z.literal("role"), userId: z.string().max(64), role: roleSchema }),
  z.object({ intent: z.literal("remove"), userId: z.string().max(64) }),
  z.object({ intent: z.literal("transfer"), userId: z.string().max(64) }),
  z.object({ intent: z.literal("delete"), confirm: z.literal("delete") }),
  z.object({
    intent: z.literal("checkout"),
    plan: z.enum(planIds),
    seats: z.coerce.number().int().min(0).max(1000).default(0),
  }),
  z.object({ intent: z.literal("seats"), seats: z.coerce.number().int().min(0).max(1000) }),
  brandingFormSchema.extend({ intent: z.literal("branding") }),
  ssoFormSchema.extend({ intent: z.literal("sso") }),
  z.object({ intent: z.literal("sso-remove") }),
  z.object({ intent: z.literal("domain-add"), domain: domainName }),
  z.object({ intent: z.literal("domain-verify"), domainId: z.string().max(64) }),
  z.object({
    intent: z.literal("domain-sso"),
    domainId: z.string().max(64),
    requireSso: z.enum(["on", "off"]),
  }),
  z.object({ intent: z.literal("domain-remove"), domainId: z.string().max(64) }),
  z.object({ intent: z.literal("scim-token") }),
  z.object({ intent: z.literal("scim-revoke") }),
  z.object({ intent: z.literal("group-roles"), groupRoles: groupRolesText }),
]);

// The services check the caller's role (members.manage, the owner rules).
export const action = /* @__PURE__ */ formAction({
  schema,
  access: signedIn,
  fields: ["email", "role"],
  resetForm: ["add", "invite"],
  handler: async ({ session: { user }, params, value }) => {
    const id = params.id ?? "";
    if (!(await membershipOf(id, user.id))) throw new DomainError(404, "Organisation not found");
    if (value.intent === "invite") {
      const invited = await inviteMember(id, user.id, { email: value.email, role: value.role });
      return { notice: `Invitation sent to ${invited.email} (valid 7 days).` };
    }
    if (value.intent === "branding") {
      // An empty field clears it (null), as the API's PATCH does.
      await setBranding(id, user.id, {
        displayName: value.displayName ?? null,
        logoUrl: value.logoUrl ?? null,
        senderName: value.senderName ?? null,
      });
      return { notice: "Branding saved: the organisation's emails carry it from now on." };
    }
    if (value.intent === "sso") {
      const { intent: _, ...form } = value;
      const input = ssoConnectionSchema.safeParse(ssoInputFromForm(form));
      if (!input.success) {
        const issue = input.error.issues[0];
        throw new DomainError(400, `${issue?.path.join(".") || "form"}: ${issue?.message}`);
      }
      await setSsoConnection(id, user.id, input.data);
      return { notice: "Single sign-on saved." };
    }
    if (value.intent === "sso-remove") {
      await removeSsoConnection(id, user.id);
      return { notice: "Single sign-on removed." };
    }
    const sso = await ssoIntent(id, user.id, value);
    if (sso) return sso;
    if (value.intent === "revoke") {
      await revokeInvitation(id, user.id, value.invitationId);
      return { notice: "Invitation revoked: its link no longer works." };
    }
    if (value.intent === "add") {
      const added = await addMember(id, user.id, { email: value.email, role: value.role });
      return { notice: `${added.email} added as ${added.role}.` };
    }
    if (value.intent === "checkout" || value.intent === "seats") {
      await requirePermission(id, user.id, "billing.manage", db());
      if (value.intent === "seats") {
        await setPaidSeats(id, value.seats);
        return { notice: "Seats changed at the payment processor." };
      }
      const organisation = await getUser(id);
      if (!organisation) throw new DomainError(404, "Organisation not found");
      const back = `/organizations/${id}`;
      const { url } = await createCheckout(organisation, "plan", value.plan, {
        ...(value.seats ? { seats: value.seats } : {}),
        successPath: `${back}?checkout=success`,
        cancelPath: `${back}?checkout=canceled`,
      });
      return redirect(url, 303);
    }
    if (value.intent === "transfer") {
      await transferOwnership(id, user.id, value.userId);
      return { notice: "Ownership transferred: you are an admin now." };
    }
    if (value.intent === "delete") {
      await deleteOrganisation(id, user.id);
      return redirect("/organizations");
    }
    if (value.intent === "role") {
      await changeRole(id, user.id, value.userId, value.role);
      return { notice: "Role changed." };
    }
    // Every other intent was answered above (ssoIntent took the single sign-on ones).
    if (value.intent !== "remove") throw new Error(`unhandled intent ${value.intent}`);
    await removeMember(id, user.id, value.userId);
    return { notice: "Member removed: their access ended at once." };
  },
});

/** The single sign-on forms (decisions 0212, 0213); undefined for any other intent. */
async function ssoIntent(
  id: string,
  personId: string,
  value: z.output<typeof schema>,
): Promise<{ notice: string; token?: string } | undefined> {
  switch (value.intent) {
    case "domain-add": {
      const added = await addDomain(id, personId, value.domain);
      return { notice: `${added.domain} added: publish its TXT record, then verify it.` };
    }
    case "domain-verify": {
      const verified = await verifyDomain(id, personId, value.domainId);
      return { notice: `${verified.domain} is verified.` };
    }
    case "domain-sso": {
      const d = await requireSsoForDomain(id, personId, value.domainId, value.requireSso === "on");
      return {
        notice: d.requireSso
          ? `Single sign-on is now required for ${d.domain}.`
          : `Single sign-on is no longer required for ${d.domain}.`,
      };
    }
    case "domain-remove":
      await removeDomain(id, personId, value.domainId);
      return { notice: "Domain removed." };
    case "scim-token": {
      const made = await createScimToken(id, personId);
      return { notice: "SCIM token made: copy it now, it is not shown again.", token: made.token };
    }
    case "scim-revoke":
      await revokeScimToken(id, personId);
      return { notice: "SCIM token revoked: provisioning stops." };
    case "group-roles":
      await setGroupRoles(id, personId, value.groupRoles);
      return { notice: "Group mapping saved: provisioned members' roles follow it now." };
    default:
      return undefined;
  }
}

const selectClass = "rounded-md border border-slate-300 bg-white px-2 py-1 text-sm";

export default function Organisation() {
  const {
    sso,
    organisation,
    role,
    manages,
    members,
    me,
    invitations,
    seats,
    branding,
    overview,
    domains,
    scim,
    billing,
  } = useLoaderData<typeof loader>();
  const actionData = useActionData<typeof action>();
  const [form, fields] = useForm<z.input<typeof newMemberSchema>>({
    id: "add-member",
    lastResult: actionData?.intent === "invite" ? actionData.result : undefined,
    constraint: getZodConstraint(newMemberSchema),
    shouldValidate: "onBlur",
    defaultValue: { role: "member" },
    onValidate: ({ formData }) => parseWithZod(formData, { schema: newMemberSchema }),
  });
  const notice = actionData?.value?.notice;
  const error = actionData && actionData.intent !== "invite" ? actionData.error : null;
  return (
    <div className="space-y-6">
      <h1 className="text-2xl font-semibold">{organisation.name}</h1>
      <p className="text-sm text-slate-600">
        You are its <strong>{role}</strong>. Choose it in the switcher at the top to work with its
        agents. Seats (members who may use its agents): {seats.used} of{" "}
        {seats.limit === null ? "unlimited" : seats.limit}.
      </p>
      {notice ? <Notice>{notice}</Notice> : null}
      {error ? (
        <p role="alert" className="text-sm text-red-700">
          {error}
        </p>
      ) : null}
      <MissionControl overview={overview} />
      {billing ? (
        <OrganisationBilling
          seats={seats}
          contact={billing.contact}
          subscribed={billing.subscribed}
          organisationId={organisation.id}
        />
      ) : null}
      <OrganisationBranding branding={branding} manages={manages} />
      {sso ? <OrganisationSso sso={sso} /> : null}
      <OrganisationDomains domains={domains} manages={manages} />
      {scim ? (
        <OrganisationScim
          scim={scim}
          {...(actionData?.value?.token ? { newToken: actionData.value.token } : {})}
        />
      ) : null}
      <Card title="Members">
        <table className="w-full text-left text-sm">
          <thead className="text-slate-500">
            <tr>
              <th className="py-2">Name</th>
              <th>Email</th>
              <th>Role</th>
              <th>
                <span className="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody className="divide-y divide-slate-100">
            {members.map((m) => (
              <tr key={m.userId}>
                <td className="py-2 font-medium">
                  {m.name}
                  {m.userId === me ? " (you)" : ""}
                </td>
                <td>{m.email}</td>
                <td>
                  {manages ? (
                    <Form method="post" className="flex items-center gap-2">
                      <input type="hidden" name="intent" value="role" />
                      <input type="hidden" name="userId" value={m.userId} />
                      <label className="sr-only" htmlFor={`role-${m.userId}`}>
                        Role of {m.name}
                      </label>
                      <select
                        id={`role-${m.userId}`}
                        name="role"
                        defaultValue={m.role}
                        className={selectClass}
                      >
                        {ROLES.map((r) => (
                          <option key={r} value={r}>
                            {r}
                          </option>
                        ))}
                      </select>
                      <button type="submit" className="text-indigo-700 underline">
                        Save
                      </button>
                    </Form>
                  ) : (
                    m.role
                  )}
                </td>
                <td className="space-x-3 text-right">
                  {role === "owner" && m.userId !== me && m.role !== "owner" ? (
                    <Form method="post" className="inline">
                      <input type="hidden" name="intent" value="transfer" />
                      <input type="hidden" name="userId" value={m.userId} />
                      <button
                        type="submit"
                        aria-label={`Make owner (you become admin): ${m.name}`}
                        className="text-indigo-700 underline"
                      >
                        Make owner (you become admin)
                      </button>
                    </Form>
                  ) : null}
                  {manages && m.userId !== me ? (
                    <Form method="post" className="inline">
                      <input type="hidden" name="intent" value="remove" />
                      <input type="hidden" name="userId" value={m.userId} />
                      <button
                        type="submit"
                        aria-label={`Remove ${m.name}`}
                        className="text-red-700 underline"
                      >
                        Remove
                      </button>
                    </Form>
                  ) : null}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </Card>
      {manages ? (
        <Card title="Invite someone">
          <Form method="post" {...getFormProps(form)} className="space-y-4">
            <input type="hidden" name="intent" value="invite" />
            <Errors id={form.errorId} errors={form.errors} />
            <Field
              label="Email"
              field={fields.email}
              type="email"
              hint="They get a link, valid 7 days, to join with this email (a new account or theirs)."
            />
            <div className="space-y-1">
              <label htmlFor={fields.role.id} className="block text-sm font-medium">
                Role
              </label>
              <select {...getSelectProps(fields.role)} className={selectClass}>
                {ROLES.map((r) => (
                  <option key={r} value={r}>
                    {r}
                  </option>
                ))}
              </select>
            </div>
            <Submit>Send invitation</Submit>
          </Form>
          {invitations.length > 0 ? (
            <ul className="mt-4 divide-y divide-slate-100 text-sm">
              {invitations.map((i) => (
                <li key={i.id} className="flex items-center justify-between py-2">
                  <span>
                    {i.email} as {i.role}
                    {i.expired ? " (expired)" : ""}
                  </span>
                  <Form method="post">
                    <input type="hidden" name="intent" value="revoke" />
                    <input type="hidden" name="invitationId" value={i.id} />
                    <button
                      type="submit"
                      aria-label={`Revoke the invitation of ${i.email}`}
                      className="text-red-700 underline"
                    >
                      Revoke
                    </button>
                  </Form>
                </li>
              ))}
            </ul>
          ) : null}
        </Card>
      ) : null}
      {role === "owner" ? (
        <Card title="Delete the organisation">
          <Form method="post" className="space-y-3 text-sm">
            <input type="hidden" name="intent" value="delete" />
            <p>
              Deletes its agents, credits, keys and audit log for good. To leave it or delete your
              account instead, make another member its owner above.
            </p>
            <label className="flex items-center gap-2">
              <input type="checkbox" name="confirm" value="delete" required />
              Yes, delete {organisation.name} and everything it owns
            </label>
            <button type="submit" className="text-red-700 underline">
              Delete organisation
            </button>
          </Form>
        </Card>
      ) : null}
    </div>
  );
}
