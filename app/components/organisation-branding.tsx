import { Form } from "@remix-run/react";
import type { BrandingView } from "../server/organisations/branding.server.ts";
import { Card } from "./forms.tsx";

// The organisation page's white-label section (decision 0207): every member sees the branding,
// members.manage edits it (a plain form: an empty field clears it).

const inputClass =
  "block w-full rounded-md border border-slate-300 px-3 py-2 text-sm shadow-sm focus:border-indigo-500 focus:outline-none focus:ring-1 focus:ring-indigo-500";

function Input(props: {
  name: string;
  label: string;
  value: string | null;
  hint: string;
  type?: string;
}) {
  const id = `branding-${props.name}`;
  return (
    <div className="space-y-1">
      <label htmlFor={id} className="block text-sm font-medium text-slate-700">
        {props.label}
      </label>
      <input
        id={id}
        name={props.name}
        type={props.type ?? "text"}
        defaultValue={props.value ?? ""}
        className={inputClass}
      />
      <p className="text-xs text-slate-500">{props.hint}</p>
    </div>
  );
}

export function OrganisationBranding({
  branding,
  manages,
}: {
  branding: BrandingView;
  manages: boolean;
}) {
  if (!branding.available) {
    return (
      <Card title="Branding (white-label emails)">
        <p className="text-sm text-slate-600">
          The {branding.plans.join(" and ")} plans let an organisation sign the emails its members
          get with its own name, logo and sender name. This organisation's plan does not include it.
        </p>
      </Card>
    );
  }
  if (!manages) {
    return (
      <Card title="Branding (white-label emails)">
        <dl className="grid grid-cols-[max-content_1fr] gap-x-4 gap-y-1 text-sm">
          <dt className="text-slate-500">Display name</dt>
          <dd>{branding.displayName ?? "not set"}</dd>
          <dt className="text-slate-500">Logo</dt>
          <dd>{branding.logoUrl ?? "not set"}</dd>
          <dt className="text-slate-500">Sender name</dt>
          <dd>{branding.senderName ?? "not set"}</dd>
        </dl>
      </Card>
    );
  }
  return (
    <Card title="Branding (white-label emails)">
      {branding.logoUrl ? (
        <img src={branding.logoUrl} alt="The organisation's logo" className="h-12" />
      ) : null}
      <Form method="post" className="space-y-4">
        <input type="hidden" name="intent" value="branding" />
        <Input
          name="displayName"
          label="Display name"
          value={branding.displayName}
          hint="The name its members' emails show for the organisation (empty: its own name)."
        />
        <Input
          name="logoUrl"
          label="Logo URL"
          type="url"
          value={branding.logoUrl}
          hint="An https address of an image, shown at the top of the emails."
        />
        <Input
          name="senderName"
          label="Sender name"
          value={branding.senderName}
          hint="The From name of the emails; the sending address stays the platform's."
        />
        <button
          type="submit"
          className="rounded-md bg-indigo-600 px-4 py-2 text-sm font-medium text-white"
        >
          Save branding
        </button>
      </Form>
    </Card>
  );
}
