import { Form } from "@remix-run/react";
import { LOG_LEVELS } from "../schemas/agents.ts";
import type { agentLogsPage } from "../server/agents/pages.server.ts";
import { AgentTabs } from "./agent-tabs.tsx";
import { Card } from "./forms.tsx";

// The logs tab (app/routes/agents.$id.logs.tsx): the gateway's log, filtered by level.

export type LogsPageData = Awaited<ReturnType<typeof agentLogsPage>>;

export function AgentLogs({ d }: { d: LogsPageData }) {
  const { logs } = d;
  return (
    <div className="space-y-6">
      <h1 className="text-2xl font-semibold">Logs of {d.agent.name}</h1>
      <AgentTabs agentId={d.agent.id} />
      <Card title="Logs">
        <Form method="get" className="flex items-end gap-2">
          <div>
            <label htmlFor="level" className="block text-sm font-medium">
              Level
            </label>
            <select
              id="level"
              name="level"
              defaultValue={logs.level ?? ""}
              className="rounded-md border border-slate-300 bg-white px-2 py-1 text-sm"
            >
              <option value="">all</option>
              {LOG_LEVELS.map((l) => (
                <option key={l} value={l}>
                  {l}
                </option>
              ))}
            </select>
          </div>
          <button
            type="submit"
            className="rounded-md border border-slate-300 bg-white px-3 py-1 text-sm"
          >
            Filter
          </button>
        </Form>
        {logs.unavailable ? (
          <p className="text-sm text-slate-600">{logs.unavailable}</p>
        ) : logs.logs.length === 0 ? (
          <p className="text-sm text-slate-600">
            No log entries{logs.level ? ` at level ${logs.level}` : ""}.
          </p>
        ) : (
          <ol className="max-h-96 overflow-y-auto font-mono text-xs" data-testid="logs">
            {logs.logs.map((entry) => (
              <li key={entry.id} className="py-0.5">
                <span className="text-slate-500">{entry.timestamp}</span>{" "}
                <span className={entry.level === "error" ? "text-red-700" : "text-slate-700"}>
                  {entry.level}
                </span>{" "}
                <span className="text-slate-500">[{entry.source}]</span> {entry.message}
              </li>
            ))}
          </ol>
        )}
      </Card>
    </div>
  );
}
