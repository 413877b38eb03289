import { Link } from "@remix-run/react";

// What the worker is at while it brings the agent's gateway up (decision 0137): the steps with
// their times, refreshed by the page's live poll with JavaScript and by a <meta refresh> inside
// <noscript> without (so a page with scripts is never reloaded under the person).

export interface ProgressData {
  step: string | null;
  steps: Array<{ step: string; label: string; at: string | null }>;
}

export const STARTING = ["provisioning", "starting", "updating"];

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
export function StartingNotice({ agentId, progress }: { agentId: string; progress: ProgressData }) {
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
