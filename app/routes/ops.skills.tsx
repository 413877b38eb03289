import type { LoaderFunctionArgs } from "@remix-run/node";
import { Link, useLoaderData } from "@remix-run/react";
import { z } from "zod";
import { Card } from "../components/forms.tsx";
import { ActionButton, OpsNotices } from "../components/ops.tsx";
import { opsAction, requireOperator } from "../server/ops/access.server.ts";
import { approveSkill, pendingVersions } from "../server/skills/publishing.server.ts";

// Public skill versions waiting for review; approving one lists it in the marketplace
// (docs/decisions/0111-skills-catalog-and-publishing.md).

export async function loader({ request }: LoaderFunctionArgs) {
  await requireOperator(request);
  const pending = await pendingVersions();
  return {
    pending: pending.map((p) => ({ ...p, createdAt: p.created_at.toISOString() })),
  };
}

export const action = opsAction({
  schema: z.object({ intent: z.literal("approve"), id: z.string().min(1).max(64) }),
  handler: async ({ id }, { operator }) => {
    const done = await approveSkill(id, operator.id);
    return `/ops/skills?notice=${encodeURIComponent(`${done.name} ${done.version} approved`)}`;
  },
});

export default function OpsSkills() {
  const { pending } = useLoaderData<typeof loader>();
  return (
    <Card title="Skills waiting for review">
      <OpsNotices />
      {pending.length === 0 ? (
        <p className="text-sm text-slate-600">Nothing to review.</p>
      ) : (
        <table className="w-full text-left text-sm" data-testid="ops-skills">
          <tbody>
            {pending.map((p) => (
              <tr key={p.id} className="border-t border-slate-100 align-top">
                <td>{p.createdAt.slice(0, 10)}</td>
                <td>
                  <a className="underline" href={`/skills/${p.name}`}>
                    {p.name}
                  </a>{" "}
                  {p.version}
                </td>
                <td>
                  <Link className="underline" to={`/ops/users/${p.publisher_id}`}>
                    {p.publisher_id}
                  </Link>
                </td>
                <td>
                  <ActionButton intent="approve" fields={{ id: p.id }}>
                    Approve
                  </ActionButton>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </Card>
  );
}
