import type { LoaderFunctionArgs } from "@remix-run/node";
import { requireOperator } from "../server/ops/access.server.ts";
import { auditExport, auditQuery } from "../server/platform/audit-export.server.ts";

// Every account's audit entries as a download (operators): ?format=csv, or JSON.

export async function loader({ request }: LoaderFunctionArgs) {
  await requireOperator(request);
  const search = Object.fromEntries(new URL(request.url).searchParams);
  const query = auditQuery.safeParse({ download: "1", ...search });
  if (!query.success) return new Response("Bad query", { status: 400 });
  const exported = await auditExport(null, query.data);
  return exported instanceof Response ? exported : Response.json(exported);
}
