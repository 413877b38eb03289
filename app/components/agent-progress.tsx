import { Link, useRevalidator } from "@remix-run/react";
import { useEffect, useState } from "react";

// What the worker is at while it brings the agent's gateway up (decisions 0137, 0158): the
// steps with their times and the estimate, pushed by the agent's event stream
// (/api/agents/:id/events) with JavaScript, and refreshed by a <meta refresh> inside <noscript>
// without (so a page with scripts is never reloaded under the person).

export interface ProgressData {
  step: string | null;
  steps: Array<{ step: string; label: string; at: string | null }>;
  action?: string;
  startedAt?: string | null;
  estimate?: { seconds: number; basedOn: number; path: string | null } | null;
}

export const STARTING = ["provisioning", "starting", "updating"];

/** One `progress` event of the stream. */
export interface PushedProgress {
  status: string;
  at: string;
  progress: ProgressData;
}

function parsePushed(data: string): PushedProgress | undefined {
  const raw: unknown = JSON.parse(data);
  if (typeof raw !== "object" || raw === null) return undefined;
  const e = raw as Record<string, unknown>;
  if (typeof e.status !== "string" || typeof e.at !== "string" || !Array.isArray(e.progress)) {
    return undefined;
  }
  return {
    status: e.status,
    at: e.at,
    progress: {
      step: typeof e.step === "string" ? e.step : null,
      steps: e.progress as ProgressData["steps"],
      action: typeof e.action === "string" ? e.action : undefined,
      startedAt: typeof e.startedAt === "string" ? e.startedAt : null,
      estimate: (e.estimate ?? null) as ProgressData["estimate"],
    },
  };
}

/** The agent's pushed progress while `active` (the stream ends itself once the agent is up). */
export function useProgressStream(agentId: string, active: boolean): PushedProgress | undefined {
  const [pushed, setPushed] = useState<PushedProgress>();
  useEffect(() => {
    if (!active || typeof EventSource === "undefined") return;
    const source = new EventSource(`/api/agents/${agentId}/events`);
    source.addEventListener("progress", (e) => {
      const next = parsePushed((e as MessageEvent<string>).data);
      if (next) setPushed(next);
    });
    source.addEventListener("done", () => source.close());
    return () => source.close();
  }, [agentId, active]);
  return pushed;
}

const ESTIMATE_OF: Record<string, string> = {
  pool: "provisions from the warm pool",
  cold: "provisions with a cold start",
  start: "starts",
  restart: "restarts",
  update: "updates",
  repair: "repairs",
  wake: "wake-ups",
};

function Estimate({ progress }: { progress: ProgressData }) {
  const e = progress.estimate;
  if (!e) return null;
  const of = ESTIMATE_OF[e.path ?? progress.action ?? ""] ?? "runs";
  return (
    <p className="text-sm text-amber-900" data-testid="progress-estimate">
      Usually ready in about {e.seconds} s (median of the last {e.basedOn} {of} here).
    </p>
  );
}

const time = (iso: string) => new Date(iso).toISOString().slice(11, 19);

export function AgentProgress({ status, progress }: { status: string; progress: ProgressData }) {
  if (!STARTING.includes(status)) return null;
  const first = progress.steps.find((s) => s.at)?.at;
  return (
    <section
      aria-labelledby="progress-title"
      className="space-y-2 rounded-lg border border-amber-300 bg-amber-50 p-4"
      data-testid="agent-progress"
    >
      <noscript>
        <meta httpEquiv="refresh" content="5" />
      </noscript>
      <h2 id="progress-title" className="font-semibold text-amber-900">
        Your agent is starting
      </h2>
      <Estimate progress={progress} />
      <ol className="space-y-1 text-sm" aria-live="polite">
        {progress.steps.map((s, i) => {
          const next = !s.at && (i === 0 || Boolean(progress.steps[i - 1]?.at));
          return (
            <li key={s.step} data-step={s.step} data-done={s.at ? "true" : "false"}>
              <span aria-hidden="true" className="inline-block w-5">
                {s.at ? "✓" : next ? "…" : "·"}
              </span>
              <span className={s.at ? "text-slate-900" : "text-slate-700"}>{s.label}</span>
              {s.at ? (
                <span className="ml-2 text-xs text-slate-700">
                  <time dateTime={s.at}>{time(s.at)}</time>
                  {first && s.at !== first
                    ? ` (+${Math.round((Date.parse(s.at) - Date.parse(first)) / 1000)} s)`
                    : ""}
                </span>
              ) : next ? (
                <span className="ml-2 text-xs text-slate-700">in progress</span>
              ) : null}
            </li>
          );
        })}
      </ol>
    </section>
  );
}

/** The chat tab's line while starting: messages may be sent, they wait for the agent. */
export function StartingNotice({
  agentId,
  progress: loaded,
}: {
  agentId: string;
  progress: ProgressData;
}) {
  const pushed = useProgressStream(agentId, true);
  const revalidator = useRevalidator();
  const up = pushed !== undefined && !STARTING.includes(pushed.status);
  // Once the agent is up the chat page's data (status, gateway error) is read again.
  // biome-ignore lint/correctness/useExhaustiveDependencies: once per change of `up`
  useEffect(() => {
    if (up) revalidator.revalidate();
  }, [up]);
  if (up) return null;
  const progress = pushed?.progress ?? loaded;
  const done = progress.steps.filter((s) => s.at).length;
  return (
    <p
      role="status"
      className="rounded-md border border-amber-300 bg-amber-50 px-3 py-2 text-sm text-amber-900"
      data-testid="agent-starting"
    >
      Your agent is starting ({done} of {progress.steps.length} steps done). You can write now: your
      message is answered as soon as it is ready.{" "}
      <Link to={`/agents/${agentId}`} className="underline">
        Watch the progress
      </Link>
    </p>
  );
}
