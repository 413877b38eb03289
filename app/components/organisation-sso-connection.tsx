import { Form } from "@remix-run/react";
import type { SsoSettings } from "../server/sso/connections.server.ts";
import { Card } from "./forms.tsx";

// The organisation page's single sign-on section (decision 0210), for those who manage members:
// what to give the identity provider, and the connection (OpenID Connect or SAML) in one form.

const inputClass =
  "block w-full rounded-md border border-slate-300 px-3 py-2 text-sm shadow-sm focus:border-indigo-500 focus:outline-none focus:ring-1 focus:ring-indigo-500";

function Input(props: { name: string; label: string; value?: string; hint?: string }) {
  const id = `sso-${props.name}`;
  return (
    <div className="space-y-1">
      <label htmlFor={id} className="block text-sm font-medium text-slate-700">
        {props.label}
      </label>
      <input id={id} name={props.name} defaultValue={props.value ?? ""} className={inputClass} />
      {props.hint ? <p className="text-xs text-slate-500">{props.hint}</p> : null}
    </div>
  );
}

function Area(props: { name: string; label: string; value?: string; hint?: string }) {
  const id = `sso-${props.name}`;
  return (
    <div className="space-y-1">
      <label htmlFor={id} className="block text-sm font-medium text-slate-700">
        {props.label}
      </label>
      <textarea
        id={id}
        name={props.name}
        rows={4}
        defaultValue={props.value ?? ""}
        className={`${inputClass} font-mono`}
      />
      {props.hint ? <p className="text-xs text-slate-500">{props.hint}</p> : null}
    </div>
  );
}

export function OrganisationSso({ sso }: { sso: SsoSettings }) {
  const c = sso.connection;
  const sp = sso.serviceProvider;
  const oidc = c?.protocol === "oidc" ? c : undefined;
  const saml = c?.protocol === "saml" ? c : undefined;
  const mapping = c
    ? Object.entries(c.groupRoles)
        .map(([group, role]) => `${group} = ${role}`)
        .join("\n")
    : "";
  return (
    <Card title="Single sign-on">
      <div className="space-y-4 text-sm">
        <p className="text-slate-600">
          Your people sign in with your identity provider: on the sign-in page they give the SSO
          name below. New people get an account on their first sign-in and join with the role their
          groups map to. See the set-up guide in docs/sso.md.
        </p>
        <dl className="grid grid-cols-[auto_1fr] gap-x-4 gap-y-1 break-all text-xs">
          <dt className="font-medium">OIDC redirect URI</dt>
          <dd>
            <code>{sp.oidcRedirectUri}</code>
          </dd>
          <dt className="font-medium">SAML entity id and metadata</dt>
          <dd>
            <code>{sp.samlMetadataUrl}</code>
          </dd>
          <dt className="font-medium">SAML ACS URL</dt>
          <dd>
            <code>{sp.samlAcsUrl}</code>
          </dd>
        </dl>
        <Form method="post" className="space-y-3">
          <input type="hidden" name="intent" value="sso" />
          <div className="space-y-1">
            <label htmlFor="sso-protocol" className="block text-sm font-medium text-slate-700">
              Protocol
            </label>
            <select
              id="sso-protocol"
              name="protocol"
              defaultValue={c?.protocol ?? "oidc"}
              className={inputClass}
            >
              <option value="oidc">OpenID Connect</option>
              <option value="saml">SAML 2.0</option>
            </select>
          </div>
          <Input
            name="slug"
            label="SSO name"
            value={c?.slug}
            hint="What your people type on the sign-in page: lowercase letters, digits, hyphens."
          />
          <label className="flex items-center gap-2">
            <input type="checkbox" name="enabled" defaultChecked={c?.enabled ?? true} /> Enabled
          </label>
          <fieldset className="space-y-3 rounded-md border border-slate-200 p-3">
            <legend className="px-1 font-medium">OpenID Connect</legend>
            <Input name="issuer" label="Issuer" value={oidc?.issuer} />
            <Input name="clientId" label="Client id" value={oidc?.clientId} />
            <Input
              name="clientSecret"
              label="Client secret"
              hint={
                oidc ? "Set; leave empty to keep it (stored encrypted, never shown)." : undefined
              }
            />
          </fieldset>
          <fieldset className="space-y-3 rounded-md border border-slate-200 p-3">
            <legend className="px-1 font-medium">SAML 2.0</legend>
            <Area
              name="metadataXml"
              label="IdP metadata XML"
              hint="Paste it, or fill the three fields below instead."
            />
            <Input name="idpEntityId" label="IdP entity id" value={saml?.idpEntityId} />
            <Input name="ssoUrl" label="IdP SSO URL (HTTP-Redirect)" value={saml?.ssoUrl} />
            <Area name="certificate" label="IdP signing certificate" value={saml?.certificate} />
          </fieldset>
          <Input
            name="groupsAttribute"
            label="Groups claim or attribute"
            value={c?.groupsAttribute ?? "groups"}
          />
          <Area
            name="groupRoles"
            label="Groups to roles"
            value={mapping}
            hint="One a line: group = admin, member, viewer or billing. Several: the highest wins."
          />
          <div className="space-y-1">
            <label htmlFor="sso-defaultRole" className="block text-sm font-medium text-slate-700">
              Role when no group matches
            </label>
            <select
              id="sso-defaultRole"
              name="defaultRole"
              defaultValue={c?.defaultRole ?? "member"}
              className={inputClass}
            >
              {["member", "viewer", "billing", "admin"].map((r) => (
                <option key={r} value={r}>
                  {r}
                </option>
              ))}
            </select>
          </div>
          <button
            type="submit"
            className="rounded-md bg-indigo-600 px-4 py-2 text-sm font-medium text-white hover:bg-indigo-700"
          >
            Save single sign-on
          </button>
        </Form>
        {c ? (
          <Form method="post">
            <input type="hidden" name="intent" value="sso-remove" />
            <button type="submit" className="text-sm text-red-700 underline">
              Remove single sign-on
            </button>
          </Form>
        ) : null}
      </div>
    </Card>
  );
}
