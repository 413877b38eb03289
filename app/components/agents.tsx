import { Form, useFetcher, useNavigation, useRevalidator } from "@remix-run/react";
import { useEffect, useRef } from "react";

// Pieces of the agents dashboard. Lifecycle buttons are plain POST forms (they work without
// JavaScript); with JavaScript the pages refresh their live parts every few seconds, so status
// and stats change without a reload.

/**
 * Calls `tick` every `intervalMs` while the tab is visible and `busy` is false. An interval, not
 * a timeout re-armed by renders: a hidden tab must resume polling when it is shown again.
 */
function useInterval(tick: () => void, busy: boolean, intervalMs: number) {
  const state = useRef({ tick, busy });
  state.current = { tick, busy };
  useEffect(() => {
    const timer = setInterval(() => {
      if (!state.current.busy && document.visibilityState === "visible") state.current.tick();
    }, intervalMs);
    return () => clearInterval(timer);
  }, [intervalMs]);
}

/** Re-runs the page's loaders every `intervalMs` while the tab is visible and nothing is pending. */
export function useLiveRefresh(intervalMs = 3_000) {
  const revalidator = useRevalidator();
  const navigation = useNavigation();
  const busy = revalidator.state !== "idle" || navigation.state !== "idle";
  useInterval(() => revalidator.revalidate(), busy, intervalMs);
}

/**
 * Polls a page resource route every `intervalMs` (tab visible, nothing pending) and returns the
 * fresher of its answer and the loader's copy (both carry `at`), so an action's redirect is not
 * overwritten by an older poll.
 */
export function useLivePoll<T extends { at: string }>(
  url: string,
  initial: T,
  intervalMs = 3_000,
): T {
  const fetcher = useFetcher<T>();
  const navigation = useNavigation();
  const busy = fetcher.state !== "idle" || navigation.state !== "idle";
  useInterval(() => fetcher.load(url), busy, intervalMs);
  const polled = fetcher.data;
  return polled && polled.at > initial.at ? (polled as T) : initial;
}

const tones: Record<string, string> = {
  running: "bg-emerald-100 text-emerald-800",
  stopped: "bg-slate-200 text-slate-700",
  error: "bg-red-100 text-red-800",
  sleeping: "bg-indigo-100 text-indigo-800",
};

export function StatusBadge({ status, testId }: { status: string; testId?: string }) {
  return (
    <span
      data-testid={testId}
      className={`inline-block rounded-full px-2 py-0.5 text-xs font-medium ${tones[status] ?? "bg-amber-100 text-amber-800"}`}
    >
      {status}
    </span>
  );
}

const labels = {
  start: "Start",
  stop: "Stop",
  restart: "Restart",
  update: "Update image",
  repair: "Repair",
  "reset-memory": "Reset memory",
} as const;

/** One form per operation, `intent` names it; the pending one says so while the worker acts. */
export function LifecycleButtons({ status }: { status: string }) {
  const navigation = useNavigation();
  const pending = navigation.state === "submitting" ? navigation.formData?.get("intent") : null;
  const running = status === "running" || status === "starting";
  // Reset memory talks to the gateway, so it is offered only while it runs.
  const shown: Array<keyof typeof labels> = running
    ? ["stop", "restart", "update", "repair", "reset-memory"]
    : ["start", "restart", "update", "repair"];
  return (
    <div className="flex flex-wrap gap-2">
      {shown.map((intent) => (
        <Form
          method="post"
          key={intent}
          onSubmit={(event) => {
            // With JavaScript, erasing the agents' sessions asks first (without it, one click).
            if (
              intent === "reset-memory" &&
              !window.confirm("Erase the agents' sessions and memory?")
            ) {
              event.preventDefault();
            }
          }}
        >
          <input type="hidden" name="intent" value={intent} />
          <button
            type="submit"
            disabled={Boolean(pending)}
            className={
              intent === "stop"
                ? "rounded-md border border-red-300 bg-white px-3 py-1.5 text-sm text-red-700 hover:bg-red-50 disabled:opacity-60"
                : "rounded-md border border-slate-300 bg-white px-3 py-1.5 text-sm hover:bg-slate-50 disabled:opacity-60"
            }
          >
            {pending === intent ? `${labels[intent]}…` : labels[intent]}
          </button>
        </Form>
      ))}
    </div>
  );
}

export function formatUptime(ms: number): string {
  if (ms <= 0) return "—";
  const s = Math.floor(ms / 1000);
  const d = Math.floor(s / 86_400);
  const h = Math.floor((s % 86_400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  if (d > 0) return `${d}d ${h}h`;
  if (h > 0) return `${h}h ${m}m`;
  return `${m}m ${s % 60}s`;
}
