import type { LoaderFunctionArgs } from "@remix-run/node";
import { useLoaderData } from "@remix-run/react";
import { z } from "zod";
import { Card } from "../components/forms.tsx";
import { ActionButton, OpsNotices } from "../components/ops.tsx";
import { opsAction, requireOperator } from "../server/ops/access.server.ts";
import { opsJobCommand, opsQueues } from "../server/ops/jobs.server.ts";
import { JOB_STATES } from "../server/platform/jobs.server.ts";

export async function loader({ request }: LoaderFunctionArgs) {
  await requireOperator(request);
  // The state names travel with the data: a .server module's values never reach the browser.
  return { ...(await opsQueues()), states: JOB_STATES };
}

export const action = opsAction({
  schema: z.object({
    intent: z.enum(["retry", "cancel"]),
    name: z.string().min(1).max(100),
    id: z.uuid(),
  }),
  handler: async ({ intent, name, id }) => {
    await opsJobCommand(intent, name, id);
    return `/ops/jobs?notice=${encodeURIComponent(`${name} ${id}: ${intent} requested`)}`;
  },
});

export default function OpsJobs() {
  const { counts, failed, states } = useLoaderData<typeof loader>();
  return (
    <div className="space-y-6">
      <OpsNotices />
      <Card title="Queues">
        <table className="w-full text-left text-sm" data-testid="ops-queues">
          <thead className="text-slate-500">
            <tr>
              <th>Queue</th>
              {states.map((s) => (
                <th key={s}>{s}</th>
              ))}
            </tr>
          </thead>
          <tbody>
            {counts.map((q) => (
              <tr key={q.name} className="border-t border-slate-100">
                <td>{q.name}</td>
                {states.map((s) => (
                  <td key={s}>{q[s]}</td>
                ))}
              </tr>
            ))}
          </tbody>
        </table>
      </Card>
      <Card title="Failed jobs">
        {failed.length === 0 ? (
          <p className="text-sm text-slate-600">No failed jobs.</p>
        ) : (
          <table className="w-full text-left text-sm" data-testid="ops-failed">
            <tbody>
              {failed.map((j) => (
                <tr key={j.id} className="border-t border-slate-100 align-top">
                  <td>{j.name}</td>
                  <td>
                    <code className="text-xs">{j.id}</code>
                  </td>
                  <td className="break-all text-red-700">{j.error}</td>
                  <td>{j.completedOn?.replace("T", " ").slice(0, 19) ?? "—"}</td>
                  <td className="space-x-1 whitespace-nowrap">
                    <ActionButton intent="retry" fields={{ name: j.name, id: j.id }}>
                      retry
                    </ActionButton>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Card>
    </div>
  );
}
