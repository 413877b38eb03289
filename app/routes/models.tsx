import type { LoaderFunctionArgs, MetaFunction } from "@remix-run/node";
import { Form, useLoaderData } from "@remix-run/react";
import { type FrontendModel, frontendModels } from "../server/ai/models.server.ts";

export const meta: MetaFunction = () => [{ title: "Models and prices — Agent Platform" }];

// The model catalog with prices, searchable; a plain GET form, so it works without JavaScript.
export async function loader({ request }: LoaderFunctionArgs) {
  const q = (new URL(request.url).searchParams.get("q") ?? "").trim().slice(0, 100);
  let models: FrontendModel[] = [];
  let error: string | undefined;
  try {
    models = await frontendModels();
  } catch {
    error = "The model catalog is unavailable right now.";
  }
  const needle = q.toLowerCase();
  const shown = needle
    ? models.filter((m) => `${m.id} ${m.name} ${m.description}`.toLowerCase().includes(needle))
    : models;
  return { q, total: models.length, models: shown, error };
}

/** USD per token → USD per million tokens, as vendors quote prices. */
const perMillion = (usdPerToken: number) =>
  usdPerToken === 0 ? "free" : `$${(usdPerToken * 1e6).toFixed(usdPerToken * 1e6 < 1 ? 3 : 2)}`;

export default function Models() {
  const { q, total, models, error } = useLoaderData<typeof loader>();
  return (
    <div className="space-y-6">
      <header className="space-y-2">
        <h1 className="text-3xl font-bold tracking-tight">Models and prices</h1>
        <p className="text-slate-600">
          Every model your agents can use, with its context window and price per million tokens.
          Usage is billed per token at these prices.
        </p>
      </header>
      <Form method="get" role="search" className="flex gap-2">
        <label htmlFor="q" className="sr-only">
          Search models
        </label>
        <input
          id="q"
          name="q"
          type="search"
          defaultValue={q}
          placeholder="Search by name, vendor or description"
          className="w-full max-w-md rounded border border-slate-300 px-3 py-2"
        />
        <button type="submit" className="rounded bg-indigo-600 px-4 py-2 font-medium text-white">
          Search
        </button>
      </Form>
      {error ? (
        <p role="alert" className="text-red-700">
          {error}
        </p>
      ) : (
        <p className="text-sm text-slate-500">
          {q ? `${models.length} of ${total} models match “${q}”.` : `${total} models.`}
        </p>
      )}
      {models.length > 0 && (
        <table className="w-full border-collapse text-left text-sm">
          <thead>
            <tr className="border-b border-slate-300">
              <th className="py-2 pr-4">Model</th>
              <th className="py-2 pr-4">Context</th>
              <th className="py-2 pr-4">Input / 1M tokens</th>
              <th className="py-2 pr-4">Output / 1M tokens</th>
            </tr>
          </thead>
          <tbody>
            {models.map((m) => (
              <tr key={m.id} className="border-b border-slate-200 align-top">
                <td className="py-2 pr-4">
                  <div className="font-medium">
                    {m.name}
                    {m.featured && (
                      <span className="ml-2 rounded bg-indigo-100 px-1.5 py-0.5 text-xs text-indigo-800">
                        featured
                      </span>
                    )}
                  </div>
                  <code className="text-xs text-slate-500">{m.id}</code>
                  {m.description && <p className="text-xs text-slate-600">{m.description}</p>}
                </td>
                <td className="py-2 pr-4">
                  {m.contextLength ? m.contextLength.toLocaleString("en") : "—"}
                </td>
                <td className="py-2 pr-4">{perMillion(m.pricing.prompt)}</td>
                <td className="py-2 pr-4">{perMillion(m.pricing.completion)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}
