import type { LoaderFunctionArgs } from "@remix-run/node";
import { Form, Link, useLoaderData } from "@remix-run/react";
import { Card } from "../components/forms.tsx";
import { requireOperator } from "../server/ops/access.server.ts";
import { searchUsers } from "../server/ops/users.server.ts";

export async function loader({ request }: LoaderFunctionArgs) {
  await requireOperator(request);
  const q = (new URL(request.url).searchParams.get("q") ?? "").slice(0, 200);
  return { q, users: await searchUsers(q) };
}

export default function OpsUsers() {
  const { q, users } = useLoaderData<typeof loader>();
  return (
    <Card title="Users">
      <Form method="get" className="flex gap-2">
        <input
          name="q"
          defaultValue={q}
          placeholder="id, email or name"
          aria-label="Search users"
          className="rounded-md border border-slate-300 px-2 py-1 text-sm"
        />
        <button type="submit" className="rounded-md border border-slate-300 px-3 py-1 text-sm">
          Search
        </button>
      </Form>
      <table className="w-full text-left text-sm" data-testid="ops-users">
        <thead className="text-slate-500">
          <tr>
            <th>Email</th>
            <th>Name</th>
            <th>Plan</th>
            <th>Role</th>
            <th>State</th>
            <th>Created</th>
          </tr>
        </thead>
        <tbody>
          {users.map((u) => (
            <tr key={u.id} className="border-t border-slate-100">
              <td>
                <Link className="underline" to={`/ops/users/${u.id}`}>
                  {u.email}
                </Link>
              </td>
              <td>{u.name}</td>
              <td>{u.plan}</td>
              <td>{u.isOperator ? "operator" : "user"}</td>
              <td>{u.suspended ? "suspended" : "active"}</td>
              <td>{u.createdAt.slice(0, 10)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </Card>
  );
}
