import type { LoaderFunctionArgs } from "@remix-run/node";
import { useLoaderData } from "@remix-run/react";
import { z } from "zod";
import { Card } from "../components/forms.tsx";
import { ActionButton, OpsNotices } from "../components/ops.tsx";
import { opsAction, requireOperator } from "../server/ops/access.server.ts";
import { nodesOverview, requestDrain, requestRecovery } from "../server/ops/nodes.server.ts";

export async function loader({ request }: LoaderFunctionArgs) {
  await requireOperator(request);
  return { nodes: await nodesOverview() };
}

const nodeId = z.string().min(1).max(64);

export const action = opsAction({
  schema: z.discriminatedUnion("intent", [
    z.object({ intent: z.literal("drain"), nodeId }),
    z.object({ intent: z.literal("recover"), nodeId }),
  ]),
  handler: async ({ intent, nodeId }) => {
    if (intent === "recover") {
      await requestRecovery(nodeId);
      return `/ops/nodes?notice=${encodeURIComponent(`re-creation of ${nodeId}'s instances from their backups queued`)}`;
    }
    await requestDrain(nodeId);
    return `/ops/nodes?notice=${encodeURIComponent(`drain of ${nodeId} queued`)}`;
  },
});

export default function OpsNodes() {
  const { nodes } = useLoaderData<typeof loader>();
  return (
    <Card title="Nodes">
      <OpsNotices />
      {nodes.length === 0 ? (
        <p className="text-sm text-slate-600">
          No nodes recorded: the runtime runs on one engine (RUNTIME_DRIVER=swarm spreads gateways
          over a swarm's nodes).
        </p>
      ) : (
        <table className="w-full text-left text-sm" data-testid="ops-nodes">
          <thead className="text-slate-500">
            <tr>
              <th>Node</th>
              <th>Health</th>
              <th>Memory (reserved / total)</th>
              <th>CPUs (reserved / total)</th>
              <th>Instances (running)</th>
              <th>Warm pool</th>
              <th>Drain, recovery</th>
            </tr>
          </thead>
          <tbody>
            {nodes.map((n) => (
              <tr key={n.id} className="border-t border-slate-100 align-top">
                <td>
                  {n.hostname || n.id} <span className="text-xs text-slate-500">({n.role})</span>
                  <div className="text-xs text-slate-500">
                    <code>{n.id}</code> {n.address}
                  </div>
                </td>
                <td className={n.healthy ? "" : "text-red-700"}>
                  {n.state}, {n.availability}
                </td>
                <td>
                  {n.reservedMemoryGiB} / {n.memoryGiB} GiB
                </td>
                <td>
                  {n.reservedCpus} / {n.cpus}
                </td>
                <td>
                  {n.instances.length} ({n.running})
                </td>
                <td data-testid={`node-warm-${n.id}`}>{n.warm}</td>
                <td className="whitespace-nowrap">
                  {n.drain ? (
                    <div
                      className={n.drain.status === "failed" ? "text-xs text-red-700" : "text-xs"}
                    >
                      drain {n.drain.status}
                      {n.drain.error ? `: ${n.drain.error}` : ""}
                    </div>
                  ) : null}
                  {n.recovery ? (
                    <div
                      className={
                        n.recovery.status === "failed" ? "text-xs text-red-700" : "text-xs"
                      }
                      data-testid="node-recovery"
                    >
                      recovery {n.recovery.status}
                      {n.recovery.summary ? `: ${n.recovery.summary}` : ""}
                    </div>
                  ) : null}
                  {n.healthy && n.availability === "active" ? (
                    <ActionButton intent="drain" fields={{ nodeId: n.id }} tone="danger">
                      drain
                    </ActionButton>
                  ) : null}
                  {!n.healthy && n.instances.length > 0 ? (
                    <ActionButton intent="recover" fields={{ nodeId: n.id }} tone="danger">
                      re-create its instances from backups
                    </ActionButton>
                  ) : null}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </Card>
  );
}
