import type { LoaderFunctionArgs } from "@remix-run/node";
import { Link, useLoaderData } from "@remix-run/react";
import { z } from "zod";
import { Card } from "../components/forms.tsx";
import { ActionButton, OpsNotices } from "../components/ops.tsx";
import { SERVICE_REQUEST_STATUSES } from "../server/billing/add-ons.server.ts";
import { opsAction, requireOperator } from "../server/ops/access.server.ts";
import { moveServiceRequest, opsServiceRequests } from "../server/ops/requests.server.ts";

export async function loader({ request }: LoaderFunctionArgs) {
  await requireOperator(request);
  return { requests: await opsServiceRequests(), statuses: SERVICE_REQUEST_STATUSES };
}

export const action = opsAction({
  schema: z.object({
    intent: z.literal("set-status"),
    id: z.string().min(1).max(64),
    status: z.enum(SERVICE_REQUEST_STATUSES),
  }),
  handler: async ({ id, status }) => {
    await moveServiceRequest(id, status);
    return `/ops/requests?notice=${encodeURIComponent(`${id}: ${status}`)}`;
  },
});

export default function OpsRequests() {
  const { requests, statuses } = useLoaderData<typeof loader>();
  return (
    <Card title="Add-on requests">
      <OpsNotices />
      {requests.length === 0 ? (
        <p className="text-sm text-slate-600">No open requests.</p>
      ) : (
        <table className="w-full text-left text-sm" data-testid="ops-requests">
          <tbody>
            {requests.map((r) => (
              <tr key={r.id} className="border-t border-slate-100 align-top">
                <td>{r.createdAt.slice(0, 10)}</td>
                <td>
                  <Link className="underline" to={`/ops/users/${r.userId}`}>
                    {r.userId}
                  </Link>
                </td>
                <td>{r.addon}</td>
                <td>{r.status}</td>
                <td className="break-all">{r.note ?? ""}</td>
                <td className="space-x-1 whitespace-nowrap">
                  {statuses
                    .filter((s) => s !== r.status)
                    .map((s) => (
                      <ActionButton key={s} intent="set-status" fields={{ id: r.id, status: s }}>
                        {s}
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
