import type { LoaderFunctionArgs } from "@remix-run/node";
import { Link, useLoaderData } from "@remix-run/react";
import { z } from "zod";
import { Card } from "../components/forms.tsx";
import { ActionButton, mib, OpsNotices } from "../components/ops.tsx";
import { opsAction, requireOperator } from "../server/ops/access.server.ts";
import {
  instanceActionFor,
  instancesOverview,
  OPS_INSTANCE_ACTIONS,
} from "../server/ops/instances.server.ts";

export async function loader({ request }: LoaderFunctionArgs) {
  await requireOperator(request);
  return { instances: await instancesOverview(), actions: OPS_INSTANCE_ACTIONS };
}

export const action = opsAction({
  schema: z.object({
    intent: z.enum(OPS_INSTANCE_ACTIONS),
    userId: z.string().min(1).max(128),
  }),
  handler: async ({ intent, userId }) => {
    await instanceActionFor(userId, intent);
    return `/ops/instances?notice=${encodeURIComponent(`${intent}: done for ${userId}`)}`;
  },
});

export default function OpsInstances() {
  const { instances, actions } = useLoaderData<typeof loader>();
  return (
    <Card title="Instances">
      <OpsNotices />
      {instances.length === 0 ? (
        <p className="text-sm text-slate-600">No instances.</p>
      ) : (
        <table className="w-full text-left text-sm" data-testid="ops-instances">
          <thead className="text-slate-500">
            <tr>
              <th>Instance</th>
              <th>Owner</th>
              <th>State</th>
              <th>Image</th>
              <th>CPU</th>
              <th>Memory</th>
              <th>Last seen</th>
              <th>Actions</th>
            </tr>
          </thead>
          <tbody>
            {instances.map((i) => (
              <tr key={i.id} className="border-t border-slate-100 align-top">
                <td>
                  <code>{i.id}</code>
                  {i.lastError ? <div className="text-xs text-red-700">{i.lastError}</div> : null}
                </td>
                <td>
                  <Link className="underline" to={`/ops/users/${i.userId}`}>
                    {i.ownerEmail}
                  </Link>
                </td>
                <td>
                  {i.status} ({i.observedState}, wants {i.desiredState})
                </td>
                <td className="break-all">{i.image ?? "—"}</td>
                <td>{i.cpuPercent === null ? "—" : `${i.cpuPercent.toFixed(1)}%`}</td>
                <td>
                  {mib(i.memoryBytes)} / {mib(i.memoryLimitBytes)}
                </td>
                <td>{i.lastSeen?.replace("T", " ").slice(0, 19) ?? "—"}</td>
                <td className="space-x-1 whitespace-nowrap">
                  {actions.map((a) => (
                    <ActionButton key={a} intent={a} fields={{ userId: i.userId }}>
                      {a}
                    </ActionButton>
                  ))}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </Card>
  );
}
