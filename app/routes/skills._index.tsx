import type { LoaderFunctionArgs, MetaFunction } from "@remix-run/node";
import { Form, useActionData, useLoaderData } from "@remix-run/react";
import { Card, Notice } from "../components/forms.tsx";
import { catalogQuerySchema, publishFormSchema, SKILL_SORTS } from "../schemas/skills.ts";
import { requirePageSession, signedIn } from "../server/accounts/pages.server.ts";
import { formAction } from "../server/platform/form-action.server.ts";
import { listCatalog } from "../server/skills/catalog.server.ts";
import { publishSkill } from "../server/skills/publishing.server.ts";
import { SKILL_CATEGORIES } from "../server/skills/skill-package.server.ts";

// The skills marketplace: browse and search, publish (SKILL.md form), my skills. Plain GET and
// POST forms, so it works without JavaScript. docs/decisions/0110-skills-api.md

export const meta: MetaFunction = () => [{ title: "Skills — Agent Platform" }];

export async function loader({ request }: LoaderFunctionArgs) {
  const { user } = await requirePageSession(request);
  const params = Object.fromEntries(new URL(request.url).searchParams);
  const parsed = catalogQuerySchema.safeParse(params);
  const query = parsed.success ? parsed.data : catalogQuerySchema.parse({});
  const [catalog, mine] = await Promise.all([
    listCatalog(user.id, {
      q: query.q,
      category: query.category,
      source: query.source,
      sort: query.sort,
      limit: query.limit,
      offset: query.offset,
    }),
    listCatalog(user.id, { mine: true, sort: "name", limit: 100, offset: 0 }),
  ]);
  return { catalog, mine: mine.skills, query, categories: [...SKILL_CATEGORIES] };
}

export const action = /* @__PURE__ */ formAction({
  schema: publishFormSchema,
  access: signedIn,
  resetForm: true,
  handler: async ({ session: { user }, value }) => {
    const done = await publishSkill(user.id, value);
    return {
      message:
        done.status === "pending-approval"
          ? `${done.name} ${done.version} published; it appears in the catalog once approved`
          : `${done.name} ${done.version} published (private)`,
    };
  },
});

export default function Skills() {
  const d = useLoaderData<typeof loader>();
  const result = useActionData<typeof action>();
  const { query, catalog } = d;
  const next = query.offset + query.limit;
  const pageLink = (offset: number) => {
    const p = new URLSearchParams();
    for (const [k, v] of Object.entries({ ...query, offset }))
      if (v !== undefined && v !== "") p.set(k, String(v));
    return `/skills?${p}`;
  };
  return (
    <main className="mx-auto max-w-4xl space-y-6 p-6">
      <h1 className="text-2xl font-semibold">Skills</h1>
      {result?.error ? <Notice tone="error">{result.error}</Notice> : null}
      {result?.value ? <Notice tone="info">{result.value.message}</Notice> : null}
      <Form method="get" className="flex flex-wrap items-end gap-2">
        <label className="text-sm">
          Search{" "}
          <input name="q" defaultValue={query.q ?? ""} className="rounded border px-2 py-1" />
        </label>
        <label className="text-sm">
          Category{" "}
          <select
            name="category"
            defaultValue={query.category ?? ""}
            className="rounded border px-2 py-1"
          >
            <option value="">All</option>
            {d.categories.map((c) => (
              <option key={c}>{c}</option>
            ))}
          </select>
        </label>
        <label className="text-sm">
          Sort{" "}
          <select name="sort" defaultValue={query.sort} className="rounded border px-2 py-1">
            {SKILL_SORTS.map((s) => (
              <option key={s}>{s}</option>
            ))}
          </select>
        </label>
        <button type="submit" className="rounded border px-3 py-1">
          Search
        </button>
      </Form>
      {!catalog.bundledAvailable ? (
        <p className="text-sm">Your gateway did not answer: its bundled skills are not listed.</p>
      ) : null}
      <ul className="space-y-2" data-testid="catalog">
        {catalog.skills.map((s) => (
          <li key={`${s.source}:${s.name}`} className="rounded border p-3">
            <a href={`/skills/${s.name}`} className="font-medium">
              {s.name}
            </a>{" "}
            <span className="text-sm">
              {s.version} · {s.publisher.name} · {s.category} · {s.installs} installs
            </span>
            <p className="text-sm">{s.description}</p>
            {s.agents.some((a) => a.installed) ? (
              <p className="text-xs">
                Installed on{" "}
                {s.agents
                  .filter((a) => a.installed)
                  .map((a) => a.agentName)
                  .join(", ")}
              </p>
            ) : null}
          </li>
        ))}
      </ul>
      <nav className="flex gap-4 text-sm">
        {query.offset > 0 ? (
          <a href={pageLink(Math.max(0, query.offset - query.limit))}>Previous</a>
        ) : null}
        {next < catalog.total ? <a href={pageLink(next)}>Next</a> : null}
        <span>{catalog.total} skills</span>
      </nav>

      <Card title="My skills">
        {d.mine.length === 0 ? (
          <p className="text-sm">You have not published a skill.</p>
        ) : (
          <ul className="text-sm" data-testid="my-skills">
            {d.mine.map((s) => (
              <li key={s.name}>
                <a href={`/skills/${s.name}`}>{s.name}</a> {s.version} · {s.visibility}
                {s.approved ? "" : " · waiting for approval"}
              </li>
            ))}
          </ul>
        )}
      </Card>

      <Card title="Publish a skill">
        <Form method="post" className="space-y-2">
          <label className="block text-sm">
            SKILL.md (frontmatter with name, description and version, then the instructions)
            <textarea
              name="skillMd"
              required
              rows={12}
              className="mt-1 w-full rounded border p-2 font-mono text-xs"
            />
          </label>
          <label className="text-sm">
            Visibility{" "}
            <select name="visibility" className="rounded border px-2 py-1">
              <option value="private">private (only you)</option>
              <option value="public">public (after review)</option>
            </select>
          </label>{" "}
          <button type="submit" className="rounded border px-3 py-1">
            Publish
          </button>
          <p className="text-xs">
            Archives with scripts and files: POST /api/skills with action publish.
          </p>
        </Form>
      </Card>
    </main>
  );
}
