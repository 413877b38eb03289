import type { LoaderFunctionArgs, MetaFunction } from "@remix-run/node";
import { NavLink, Outlet, useLoaderData } from "@remix-run/react";
import { requireOperator } from "../server/ops/access.server.ts";

export const meta: MetaFunction = () => [{ title: "Operator console — Agent Platform" }];

export async function loader({ request }: LoaderFunctionArgs) {
  const operator = await requireOperator(request);
  return { email: operator.email };
}

const links = [
  ["/ops", "Overview"],
  ["/ops/users", "Users"],
  ["/ops/instances", "Instances"],
  ["/ops/nodes", "Nodes"],
  ["/ops/jobs", "Jobs"],
  ["/ops/requests", "Requests"],
  ["/ops/skills", "Skills"],
  ["/ops/gateway", "Gateway prices"],
  ["/ops/versions", "OpenClaw versions"],
  ["/ops/audit", "Audit log"],
] as const;

export default function OpsLayout() {
  const { email } = useLoaderData<typeof loader>();
  return (
    <div className="space-y-6">
      <header className="flex flex-wrap items-center gap-4">
        <h1 className="text-2xl font-semibold">Operator console</h1>
        <nav className="flex gap-3 text-sm">
          {links.map(([to, label]) => (
            <NavLink
              key={to}
              to={to}
              end={to === "/ops"}
              className={({ isActive }) => (isActive ? "font-semibold underline" : "underline")}
            >
              {label}
            </NavLink>
          ))}
        </nav>
        <span className="ml-auto text-xs text-slate-500">{email}</span>
      </header>
      <Outlet />
    </div>
  );
}
