import { Form, Link } from "@remix-run/react";
import type { ReactNode } from "react";
import type { skillsPage } from "../server/agents/chat-page.server.ts";
import type { FormReply } from "../server/platform/form-action.server.ts";
import { AgentTabs } from "./agent-tabs.tsx";
import { Card, Notice } from "./forms.tsx";

// The skills tab (app/routes/agents.$id.skills.tsx): the skills that can work on this agent,
// each with its on/off switch; the ones that cannot (missing binaries, keys, OS) are counted
// and shown on demand instead of as a wall of "unavailable here".

export type SkillsPageData = Awaited<ReturnType<typeof skillsPage>>;

export function AgentSkills({
  d,
  reply,
  extra,
}: {
  d: SkillsPageData;
  reply: FormReply<{ message: string }> | undefined;
  /** Cards of other areas before the gateway's list (the marketplace's installed skills). */
  extra?: ReactNode;
}) {
  return (
    <div className="space-y-6">
      <h1 className="text-2xl font-semibold">Skills of {d.agent.name}</h1>
      <AgentTabs agentId={d.agent.id} />
      {d.gatewayError ? <Notice tone="error">{d.gatewayError}</Notice> : null}
      {reply?.error ? (
        <Notice tone="error">{reply.error}</Notice>
      ) : reply?.value ? (
        <Notice>{reply.value.message}</Notice>
      ) : null}
      {extra}
      <Card title={d.all ? "All skills" : "Skills that work on this agent"}>
        {d.skills.length === 0 && !d.gatewayError ? (
          <p className="text-sm text-slate-600">No skills to show.</p>
        ) : null}
        <ul className="grid gap-1 text-sm md:grid-cols-2" data-testid="skills">
          {d.skills.map((s) => (
            <li key={s.id} className="flex items-center justify-between gap-2">
              <span title={s.description}>
                {s.emoji ? `${s.emoji} ` : ""}
                {s.name}
                {s.eligible ? "" : " (unavailable here)"}
              </span>
              <Form method="post">
                <input type="hidden" name="intent" value="skill" />
                <input type="hidden" name="skillId" value={s.id} />
                <input type="hidden" name="enabled" value={s.enabled ? "false" : "true"} />
                <button
                  type="submit"
                  aria-label={`${s.enabled ? "Disable" : "Enable"} ${s.name}`}
                  aria-pressed={s.enabled}
                  className="rounded border border-slate-400 px-2 text-xs"
                >
                  {s.enabled ? "On" : "Off"}
                </button>
              </Form>
            </li>
          ))}
        </ul>
        {d.all ? (
          <p className="text-sm">
            <Link to="?" className="text-indigo-700 underline">
              Show only the skills that work here
            </Link>
          </p>
        ) : d.hidden > 0 ? (
          <p className="text-sm text-slate-600" data-testid="skills-hidden">
            {d.hidden} more skill{d.hidden === 1 ? "" : "s"} cannot work on this agent (a program,
            key or system they need is missing).{" "}
            <Link to="?all=1" className="text-indigo-700 underline">
              Show all
            </Link>
          </p>
        ) : null}
      </Card>
    </div>
  );
}
