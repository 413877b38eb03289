import type { LoaderFunctionArgs, MetaFunction } from "@remix-run/node";
import { Link, useLoaderData } from "@remix-run/react";
import { AuditTable } from "../components/audit-table.tsx";
import { Card } from "../components/forms.tsx";
import { requirePageSession } from "../server/accounts/pages.server.ts";
import { listAudit } from "../server/platform/audit.server.ts";

export const meta: MetaFunction = () => [{ title: "Audit log — Agent Platform" }];

const PAGE = 50;

export async function loader({ request }: LoaderFunctionArgs) {
  const { user } = await requirePageSession(request);
  const before = Number(new URL(request.url).searchParams.get("before"));
  return listAudit({
    userId: user.id,
    limit: PAGE,
    before: Number.isSafeInteger(before) && before > 0 ? before : undefined,
  });
}

export default function AuditPage() {
  const page = useLoaderData<typeof loader>();
  return (
    <div className="mx-auto max-w-5xl space-y-6 p-6">
      <Card title="Audit log">
        <p className="text-sm text-slate-600">
          Sign-ins, sessions, API keys, password changes, plan and credit changes, agents and
          operator actions on your account. Kept 90 days (a year with the Audit Logs add-on).
        </p>
        <p className="flex gap-4 text-sm">
          <a className="underline" href="/api/audit?format=csv">
            Export CSV
          </a>
          <a className="underline" href="/api/audit?format=json&download=1">
            Export JSON
          </a>
        </p>
        <AuditTable entries={page.entries} />
        <p className="flex gap-4 text-sm">
          <Link className="underline" to="/settings/audit">
            Newest
          </Link>
          {page.nextCursor ? (
            <Link className="underline" to={`/settings/audit?before=${page.nextCursor}`}>
              Older
            </Link>
          ) : null}
        </p>
      </Card>
    </div>
  );
}
