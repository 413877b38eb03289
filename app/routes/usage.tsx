import type { LoaderFunctionArgs, MetaFunction } from "@remix-run/node";
import { useLoaderData } from "@remix-run/react";
import { UsageView } from "../components/usage.tsx";
import { requirePageSession } from "../server/accounts/pages.server.ts";
import { usagePeriod, usagePeriods, usageReport } from "../server/ai/usage.server.ts";

export const meta: MetaFunction = () => [{ title: "AI usage — Agent Platform" }];

// The signed-in user's AI usage: daily tokens and cost per model over 7, 30 or 90 UTC days
// (`?days=`, plain links: no JavaScript needed).
export async function loader({ request }: LoaderFunctionArgs) {
  const { user } = await requirePageSession(request);
  const period = usagePeriod(new URL(request.url).searchParams.get("days"));
  return { periods: [...usagePeriods], report: await usageReport(user.id, period) };
}

export default function Usage() {
  const { periods, report } = useLoaderData<typeof loader>();
  return <UsageView report={report} periods={periods} />;
}
