import type { LoaderFunctionArgs } from "@remix-run/node";
import { Link, useLoaderData } from "@remix-run/react";
import { AuditTable } from "../components/audit-table.tsx";
import { Card } from "../components/forms.tsx";
import { requireOperator } from "../server/ops/access.server.ts";
import { listAudit } from "../server/platform/audit.server.ts";
import { auditQuery } from "../server/platform/audit-export.server.ts";

// Every account's audit entries (operators); /ops/audit/export exports them all.

export async function loader({ request }: LoaderFunctionArgs) {
  await requireOperator(request);
  const search = Object.fromEntries(new URL(request.url).searchParams);
  const query = auditQuery.safeParse(search);
  if (!query.success) throw new Response("Bad query", { status: 400 });
  return listAudit({ userId: null, limit: query.data.limit, before: query.data.before });
}

export default function OpsAudit() {
  const page = useLoaderData<typeof loader>();
  return (
    <Card title="Audit log (all accounts)">
      <p className="flex gap-4 text-sm">
        <a className="underline" href="/ops/audit/export?format=csv">
          Export CSV
        </a>
        <a className="underline" href="/ops/audit/export?download=1">
          Export JSON
        </a>
      </p>
      <AuditTable entries={page.entries} showUser />
      {page.nextCursor ? (
        <Link className="text-sm underline" to={`/ops/audit?before=${page.nextCursor}`}>
          Older
        </Link>
      ) : null}
    </Card>
  );
}
