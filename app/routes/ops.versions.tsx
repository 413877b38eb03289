import type { LoaderFunctionArgs } from "@remix-run/node";
import { Form, useLoaderData } from "@remix-run/react";
import { Card } from "../components/forms.tsx";
import { OpsNotices } from "../components/ops.tsx";
import {
  gatewayVersionPolicy,
  setGatewayVersionPolicy,
  versionPolicyInput,
} from "../server/agents/gateway-versions.server.ts";
import { opsAction, requireOperator } from "../server/ops/access.server.ts";

// The OpenClaw build new instances and updates get, and the versions refused
// (docs/decisions/0161-gateway-versions.md).

export async function loader({ request }: LoaderFunctionArgs) {
  await requireOperator(request);
  return { policy: await gatewayVersionPolicy() };
}

export const action = opsAction({
  schema: versionPolicyInput,
  handler: async (input, { operator }) => {
    const policy = await setGatewayVersionPolicy(input, {
      type: "operator",
      id: operator.id,
      userId: operator.id,
    });
    return `/ops/versions?notice=${encodeURIComponent(`New gateways get ${policy.pinnedImage}`)}`;
  },
});

export default function OpsVersions() {
  const { policy } = useLoaderData<typeof loader>();
  return (
    <Card title="OpenClaw versions">
      <OpsNotices />
      <p className="text-sm text-slate-600" data-testid="ops-versions-pinned">
        New instances, pooled gateways and updates get <code>{policy.pinnedImage}</code> (
        {policy.pinnedBy === "operator" ? "pinned here" : "AGENT_GATEWAY_IMAGE"}). Blocked:{" "}
        {policy.blockedVersions.length ? policy.blockedVersions.join(", ") : "none"}
        {policy.blockedByEnvironment.length
          ? ` (${policy.blockedByEnvironment.join(", ")} by GATEWAY_BLOCKED_VERSIONS)`
          : ""}
        .
      </p>
      <Form method="post" className="mt-3 space-y-2 text-sm">
        <label className="block">
          Pinned image (blank: AGENT_GATEWAY_IMAGE)
          <input
            name="pinnedImage"
            defaultValue={policy.pinnedBy === "operator" ? policy.pinnedImage : ""}
            placeholder="agent-gateway:2026.9.6"
            className="ml-2 w-72 rounded border border-slate-300 px-2 py-0.5 font-mono"
          />
        </label>
        <label className="block">
          Blocked versions (comma-separated)
          <input
            name="blockedVersions"
            defaultValue={policy.blockedByOperator.join(", ")}
            placeholder="2026.9.5"
            className="ml-2 w-72 rounded border border-slate-300 px-2 py-0.5 font-mono"
          />
        </label>
        <button type="submit" className="rounded border border-slate-300 px-2 py-0.5">
          Save
        </button>
      </Form>
    </Card>
  );
}
