import type { LoaderFunctionArgs, MetaFunction } from "@remix-run/node";
import { Form, useActionData, useLoaderData } from "@remix-run/react";
import { Card, Notice } from "../components/forms.tsx";
import { skillPageActions } from "../schemas/skills.ts";
import { requirePageSession, signedIn } from "../server/accounts/pages.server.ts";
import { DomainError } from "../server/platform/errors.server.ts";
import { formAction } from "../server/platform/form-action.server.ts";
import { skillDetail } from "../server/skills/catalog.server.ts";
import { installSkill, removeSkill, updateSkillVersion } from "../server/skills/installs.server.ts";
import { unlistVersion } from "../server/skills/publishing.server.ts";

// One skill of the marketplace: its rendered SKILL.md, versions, install / update / remove on
// the caller's agents, unlist for its publisher. Plain forms (works without JavaScript).

export const meta: MetaFunction = ({ params }) => [
  { title: `${params.name} — Skills — Agent Platform` },
];

export async function loader({ request, params }: LoaderFunctionArgs) {
  const { user } = await requirePageSession(request);
  try {
    return { skill: await skillDetail(user.id, String(params.name)), userId: user.id };
  } catch (error) {
    if (error instanceof DomainError && error.status === 404)
      throw new Response("Skill not found", { status: 404 });
    throw error;
  }
}

export const action = /* @__PURE__ */ formAction({
  schema: skillPageActions,
  access: signedIn,
  handler: async ({ params, session: { user }, value }) => {
    const name = String(params.name);
    switch (value.intent) {
      case "install": {
        const done = await installSkill(user.id, { name, agentId: value.agentId });
        return { message: `${name} ${done.version} installed` };
      }
      case "update": {
        const done = await updateSkillVersion(user.id, { name, agentId: value.agentId });
        return { message: `${name} is at version ${done.version}` };
      }
      case "remove":
        await removeSkill(user.id, { name, agentId: value.agentId });
        return { message: `${name} removed` };
      case "unlist":
        await unlistVersion(user.id, name, value.version);
        return { message: `${name} ${value.version} unlisted` };
    }
  },
});

export default function SkillPage() {
  const { skill, userId } = useLoaderData<typeof loader>();
  const result = useActionData<typeof action>();
  const mine = skill.publisher.id === userId;
  return (
    <main className="mx-auto max-w-4xl space-y-6 p-6">
      <p className="text-sm">
        <a href="/skills">← Skills</a>
      </p>
      <h1 className="text-2xl font-semibold">
        {skill.name} <span className="text-base">{skill.version}</span>
      </h1>
      {result?.error ? <Notice tone="error">{result.error}</Notice> : null}
      {result?.value ? <Notice tone="info">{result.value.message}</Notice> : null}
      <p>{skill.description}</p>
      <p className="text-sm">
        {skill.publisher.name} · {skill.category} · {skill.installs} installs · {skill.visibility}
        {skill.approved ? "" : " · waiting for approval"}
      </p>
      {Object.entries(skill.requirements).some(([, v]) => v.length > 0) ? (
        <p className="text-sm">
          Needs:{" "}
          {Object.entries(skill.requirements)
            .filter(([, v]) => v.length > 0)
            .map(([k, v]) => `${k} ${v.join(", ")}`)
            .join("; ")}
        </p>
      ) : null}

      {skill.source !== "bundled" ? (
        <Card title="Your agents">
          {skill.agents.length === 0 ? (
            <p className="text-sm">
              You have no agent yet. <a href="/agents">Create one</a>.
            </p>
          ) : (
            <ul className="space-y-1 text-sm" data-testid="skill-agents">
              {skill.agents.map((a) => (
                <li key={a.agentId} className="flex items-center justify-between gap-2">
                  <span>
                    {a.agentName}: {a.installed ? `installed (${a.version})` : "not installed"}
                  </span>
                  <span className="flex gap-2">
                    {(a.installed
                      ? a.version !== skill.version
                        ? ["update", "remove"]
                        : ["remove"]
                      : ["install"]
                    ).map((intent) => (
                      <Form method="post" key={intent}>
                        <input type="hidden" name="intent" value={intent} />
                        <input type="hidden" name="agentId" value={a.agentId} />
                        <button type="submit" className="rounded border px-2 text-xs">
                          {intent[0]?.toUpperCase()}
                          {intent.slice(1)}
                        </button>
                      </Form>
                    ))}
                  </span>
                </li>
              ))}
            </ul>
          )}
        </Card>
      ) : null}

      <Card title="SKILL.md">
        <div
          className="prose max-w-none text-sm"
          // biome-ignore lint/security/noDangerouslySetInnerHtml: micromark output, HTML in the SKILL.md is escaped (catalog.server.ts)
          dangerouslySetInnerHTML={{ __html: skill.html }}
        />
      </Card>

      <Card title="Versions">
        <ul className="text-sm">
          {skill.versions.map((v) => (
            <li key={v.version} className="flex items-center gap-2">
              {v.version} · {v.createdAt.slice(0, 10)}
              {v.unlisted ? " · unlisted" : v.approved ? "" : " · waiting for approval"}
              {mine && !v.unlisted ? (
                <Form method="post">
                  <input type="hidden" name="intent" value="unlist" />
                  <input type="hidden" name="version" value={v.version} />
                  <button type="submit" className="rounded border px-2 text-xs">
                    Unlist
                  </button>
                </Form>
              ) : null}
            </li>
          ))}
        </ul>
      </Card>
    </main>
  );
}
