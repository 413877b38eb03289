import { Form } from "@remix-run/react";
import type { OrganisationDomain } from "../server/organisations/domains.server.ts";
import type { GroupRole } from "../server/scim/group-roles.server.ts";
import type { ScimTokenInfo } from "../server/scim/tokens.server.ts";
import { Card } from "./forms.tsx";

// The organisation page's single sign-on sections (issue 49, decisions 0212 and 0213): verified
// domains with their TXT record and the SSO requirement, and SCIM provisioning (token, group →
// role mapping). Every member sees the domains; owners and admins change them. Plain forms.

const button = "rounded-md bg-indigo-600 px-3 py-1.5 text-sm font-medium text-white";
const link = "text-indigo-700 underline";
const inputClass =
  "block w-full rounded-md border border-slate-300 px-3 py-2 text-sm shadow-sm focus:border-indigo-500 focus:outline-none focus:ring-1 focus:ring-indigo-500";

function DomainRow({ d, manages }: { d: OrganisationDomain; manages: boolean }) {
  return (
    <li className="space-y-2 py-3">
      <div className="flex items-center justify-between">
        <span className="font-medium">
          {d.domain}{" "}
          <span className={d.verified ? "text-green-700" : "text-amber-700"}>
            {d.verified ? "verified" : "not verified"}
          </span>
          {d.requireSso ? " · single sign-on required" : ""}
        </span>
        {manages ? (
          <Form method="post">
            <input type="hidden" name="intent" value="domain-remove" />
            <input type="hidden" name="domainId" value={d.id} />
            <button
              type="submit"
              aria-label={`Remove ${d.domain}`}
              className="text-red-700 underline"
            >
              Remove
            </button>
          </Form>
        ) : null}
      </div>
      {!d.verified ? (
        <p className="text-xs text-slate-600">
          Publish a TXT record at <code>{d.record.name}</code> with the value{" "}
          <code className="break-all">{d.record.value}</code>, then verify.
        </p>
      ) : null}
      {manages ? (
        <Form method="post" className="flex gap-3">
          <input type="hidden" name="domainId" value={d.id} />
          {!d.verified ? (
            <button type="submit" name="intent" value="domain-verify" className={link}>
              Verify now
            </button>
          ) : (
            <>
              <input type="hidden" name="requireSso" value={d.requireSso ? "off" : "on"} />
              <button type="submit" name="intent" value="domain-sso" className={link}>
                {d.requireSso ? "Stop requiring single sign-on" : "Require single sign-on"}
              </button>
            </>
          )}
        </Form>
      ) : null}
    </li>
  );
}

export function OrganisationDomains({
  domains,
  manages,
}: {
  domains: OrganisationDomain[];
  manages: boolean;
}) {
  return (
    <Card title="Verified domains">
      <p className="text-sm text-slate-600">
        A verified domain lets the organisation require single sign-on for everyone with an email at
        it (owners keep a break-glass password sign-in, recorded in the audit log and mailed to the
        owners) and lets SCIM make accounts at it.
      </p>
      {domains.length > 0 ? (
        <ul className="divide-y divide-slate-100 text-sm">
          {domains.map((d) => (
            <DomainRow key={d.id} d={d} manages={manages} />
          ))}
        </ul>
      ) : null}
      {manages ? (
        <Form method="post" className="mt-3 flex items-end gap-2">
          <input type="hidden" name="intent" value="domain-add" />
          <div className="flex-1 space-y-1">
            <label htmlFor="new-domain" className="block text-sm font-medium text-slate-700">
              Domain
            </label>
            <input id="new-domain" name="domain" placeholder="example.com" className={inputClass} />
          </div>
          <button type="submit" className={button}>
            Add domain
          </button>
        </Form>
      ) : null}
    </Card>
  );
}

export interface ScimView {
  baseUrl: string;
  token: ScimTokenInfo | null;
  groupRoles: GroupRole[];
}

export function OrganisationScim({ scim, newToken }: { scim: ScimView; newToken?: string }) {
  return (
    <Card title="SCIM provisioning">
      <p className="text-sm text-slate-600">
        Give your identity provider the base URL <code>{scim.baseUrl}</code> and a bearer token.
        People it assigns become members (accounts are made at verified domains); people it
        deactivates lose their access at once.
      </p>
      {newToken ? (
        <p role="status" className="text-sm">
          The new token, shown this once: <code className="break-all">{newToken}</code>
        </p>
      ) : null}
      <p className="text-sm">
        {scim.token
          ? `Token ${scim.token.preview}, made ${scim.token.createdAt.slice(0, 10)}, last used ${scim.token.lastUsedAt?.slice(0, 16).replace("T", " ") ?? "never"}.`
          : "No token yet."}
      </p>
      <Form method="post" className="flex gap-3">
        <button type="submit" name="intent" value="scim-token" className={button}>
          {scim.token ? "Rotate the token" : "Make a token"}
        </button>
        {scim.token ? (
          <button
            type="submit"
            name="intent"
            value="scim-revoke"
            className="text-red-700 underline"
          >
            Revoke the token
          </button>
        ) : null}
      </Form>
      <Form method="post" className="mt-4 space-y-2">
        <input type="hidden" name="intent" value="group-roles" />
        <label htmlFor="group-roles" className="block text-sm font-medium text-slate-700">
          Group → role, one a line (<code>Group name = admin | member | viewer | billing</code>)
        </label>
        <textarea
          id="group-roles"
          name="groupRoles"
          rows={4}
          defaultValue={scim.groupRoles.map((g) => `${g.group} = ${g.role}`).join("\n")}
          className={inputClass}
        />
        <p className="text-xs text-slate-500">
          Groups compare in any case; someone in several gets the highest role, someone in none is a
          member. Owners are never changed by SCIM.
        </p>
        <button type="submit" className={button}>
          Save the mapping
        </button>
      </Form>
    </Card>
  );
}
