import { type LoaderFunctionArgs, type MetaFunction, redirect } from "@remix-run/node";
import { Form, Link, useActionData, useLoaderData, useSearchParams } from "@remix-run/react";
import { z } from "zod";
import { Card, Notice, Submit } from "../components/forms.tsx";
import { requirePageSession, signedIn } from "../server/accounts/pages.server.ts";
import { storageUsedBytes } from "../server/agents/instances.server.ts";
import { STORAGE_UPGRADE_GB } from "../server/billing/catalog.server.ts";
import { createStorageCheckout } from "../server/billing/checkout.server.ts";
import { storageLimitGb } from "../server/billing/subscriptions.server.ts";
import { formAction } from "../server/platform/form-action.server.ts";

export const meta: MetaFunction = () => [{ title: "Files — Agent Platform" }];

// The files dashboard: storage used (the agents' state volume, measured by the worker's
// reconcile pass) against the limit, and the storage upgrade (+50 GB).
export async function loader({ request }: LoaderFunctionArgs) {
  const { user } = await requirePageSession(request);
  const [usedBytes, limitGb] = await Promise.all([
    storageUsedBytes(user.id),
    storageLimitGb(user.id),
  ]);
  // Two decimals: a fresh agent's state is a few MB, which 0 GB would hide.
  const usedGb = Math.round((usedBytes / 1024 ** 3) * 100) / 100;
  return { usedGb, usedBytes, limitGb, upgradeGb: STORAGE_UPGRADE_GB };
}

// A button without fields.
const noFields = z.object({});

export const action = /* @__PURE__ */ formAction({
  schema: noFields,
  access: signedIn,
  handler: async ({ session: { user } }) => redirect((await createStorageCheckout(user)).url, 303),
});

export default function Files() {
  const { usedGb, usedBytes, limitGb, upgradeGb } = useLoaderData<typeof loader>();
  const result = useActionData<typeof action>();
  const [params] = useSearchParams();
  return (
    <div className="space-y-6">
      <h1 className="text-2xl font-semibold">Files</h1>
      {params.get("upgrade") === "success" ? (
        <Notice>
          Storage upgrade paid: the extra space appears as soon as the payment is confirmed.
        </Notice>
      ) : null}
      {params.get("error") ? <Notice tone="error">The storage upgrade was canceled.</Notice> : null}
      {result?.error ? <Notice tone="error">{result.error}</Notice> : null}
      <Card title="Storage">
        <p data-testid="storage">
          {usedGb} GB used of {limitGb} GB
        </p>
        <p className="text-sm text-slate-600">
          Your agents' state (workspace, memory, sessions): {(usedBytes / 1024 ** 2).toFixed(1)} MB.
        </p>
        <progress max={limitGb} value={usedGb} className="w-full" />
        <Form method="post">
          <Submit>Upgrade: +{upgradeGb} GB</Submit>
        </Form>
        <Link to="/billing" className="text-sm text-indigo-700 underline">
          Billing
        </Link>
      </Card>
    </div>
  );
}
