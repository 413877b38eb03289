import { Form, Link, useSearchParams } from "@remix-run/react";
import type { ReactNode } from "react";
import type { agentPage } from "../server/agents/pages.server.ts";
import type { FormReply } from "../server/platform/form-action.server.ts";
import { AgentProgress, STARTING, useProgressStream } from "./agent-progress.tsx";
import { StorageFigure, StorageNotice } from "./agent-storage.tsx";
import { AgentTabs } from "./agent-tabs.tsx";
import { LifecycleButtons, StatusBadge, useLivePoll } from "./agents.tsx";
import { BackupsPanel } from "./backups-panel.tsx";
import { Card, Notice } from "./forms.tsx";
import { VerificationPanel } from "./verification-panel.tsx";

// The agent's status tab (app/routes/agents.$id._index.tsx): status and lifecycle, live
// figures, messages and verification.

export type AgentPageData = Awaited<ReturnType<typeof agentPage>>;

const notices: Record<string, string> = {
  provisioned: "Agent provisioned: its gateway is being set up.",
  start: "Agent started.",
  stop: "Agent stopped.",
  restart: "Agent restarted.",
  update: "Image update started: the gateway is recreated in the background.",
  repair: "Agent repaired: container recreated, configuration re-applied.",
  "reset-memory": "Memory reset: sessions cleared.",
  config: "Configuration saved; the gateway picks it up when it runs.",
  "config-applied": "Configuration saved and applied.",
  "config-refused": "Configuration saved, but the gateway refused it (see the configuration).",
  verified: "Agent verified.",
  unverified: "Verification removed.",
  backup: "Backup started: it is listed as ready when it is stored.",
  restored: "Backup restored: the gateway runs on the restored state.",
  "restore-running": "The restore is still running: its outcome shows next to the backup.",
  "backup-deleted": "Backup deleted.",
  cloned:
    "This agent is a clone: its memory, workspace and messages were copied from the original.",
};

function Row({ label, children }: { label: string; children: ReactNode }) {
  return (
    <div className="flex gap-4 py-1 text-sm">
      <dt className="w-36 shrink-0 text-slate-500">{label}</dt>
      <dd className="min-w-0 break-all">{children}</dd>
    </div>
  );
}

type Live = AgentPageData["live"];

function StatsCard({ live }: { live: Live }) {
  const s = live.stats;
  const asleep =
    live.status === "sleeping" && live.wakeQueue ? (
      <p className="pb-2 text-sm text-slate-600" data-testid="agent-wake-queue" aria-live="polite">
        {live.wakeQueue.ahead === 0
          ? "Waking: it is next."
          : `Waking, ${live.wakeQueue.ahead} ahead of you.`}
      </p>
    ) : live.provisionQueue ? (
      <p
        className="pb-2 text-sm text-slate-600"
        data-testid="agent-provision-queue"
        aria-live="polite"
      >
        {live.provisionQueue.ahead === 0
          ? "Starting: it is next."
          : `Starting: waiting its turn, ${live.provisionQueue.ahead} ahead of you.`}
      </p>
    ) : live.status === "sleeping" ? (
      <p className="pb-2 text-sm text-slate-600" data-testid="agent-asleep">
        Asleep while idle: its memory is back with the host. The next message wakes it; the figures
        are from the last sample.
      </p>
    ) : null;
  if (live.statsStatus !== "ok") {
    // The contract's mock variant: no live container figures, only what the platform recorded.
    return (
      <div data-testid="agent-stats">
        <p className="pb-2 text-sm text-slate-600">
          {live.status === "running"
            ? "No live figures yet: the worker has not sampled the gateway."
            : live.status === "unknown"
              ? "No live figures: the container engine does not answer, so the gateway's state is unknown."
              : "No live figures: the gateway is not running."}
        </p>
        <dl>
          <Row label="Messages">{s.messagesProcessed}</Row>
          <Row label="Last hour">{s.messagesPerHour}</Row>
        </dl>
      </div>
    );
  }
  return (
    <>
      {asleep}
      <dl data-testid="agent-stats">
        <Row label="CPU">{s.cpu}</Row>
        <Row label="Memory">
          {s.memory} ({s.memoryPercent})
        </Row>
        <Row label="Network in / out">{s.network}</Row>
        <Row label="Processes">{s.pids}</Row>
        <Row label="Uptime">{s.uptimeFormatted}</Row>
        <Row label="Messages">
          {s.messagesProcessed} ({s.messagesPerHour} in the last hour)
        </Row>
        <Row label="Response time">
          {s.averageResponseTime === "N/A" ? "N/A" : `${s.averageResponseTime} ms`}
        </Row>
        <Row label="Success rate">{s.successRate}</Row>
      </dl>
    </>
  );
}

export function AgentPage({
  page,
  actionData,
}: {
  page: AgentPageData;
  actionData: FormReply<unknown> | undefined;
}) {
  const [searchParams] = useSearchParams();
  const { agent, verification, messages } = page;
  const polled = useLivePoll(`/agents/${agent.id}/live`, page.live);
  // While the agent starts, its event stream pushes each step; the newer of both is shown.
  const pushed = useProgressStream(agent.id, STARTING.includes(polled.status));
  const live =
    pushed && pushed.at > polled.at
      ? { ...polled, status: pushed.status, progress: pushed.progress }
      : polled;
  // An error of this submission replaces the notice of an earlier one (still in the URL).
  const notice = actionData?.error ? undefined : notices[searchParams.get("notice") ?? ""];
  const pageLink = (offset: number) => {
    const next = new URLSearchParams(searchParams);
    next.delete("notice");
    next.set("offset", String(offset));
    next.set("limit", String(messages.limit));
    return `?${next.toString()}`;
  };
  const shownTo = messages.offset + messages.messages.length;
  return (
    <div className="space-y-6">
      <header className="flex flex-wrap items-center gap-3">
        <h1 className="text-2xl font-semibold">{agent.name}</h1>
        <span aria-live="polite">
          <StatusBadge status={live.status} testId="agent-status" />
        </span>
        <span className="ml-auto flex gap-4 text-sm">
          {/* The agent's own address: OpenClaw's Control UI behind the platform's sign-in. */}
          <a
            href={agent.url}
            title={agent.url}
            className="text-indigo-700 underline"
            data-testid="agent-address"
          >
            Control UI
          </a>
          <Link to="/agents" className="text-indigo-700 underline">
            All agents
          </Link>
        </span>
      </header>
      <AgentTabs agentId={agent.id} />
      <AgentProgress status={live.status} progress={live.progress} />
      {notice ? <Notice>{notice}</Notice> : null}
      {actionData?.error ? <Notice tone="error">{actionData.error}</Notice> : null}
      {live.lastError ? <Notice tone="error">Last error: {live.lastError}</Notice> : null}
      <StorageNotice storage={agent.storage} />
      {page.modelSource.problem ? (
        <div data-testid="model-source-problem">
          <Notice tone="error">
            {page.modelSource.problem.message}{" "}
            <Link to="/billing" className="underline">
              Billing
            </Link>
          </Notice>
        </div>
      ) : null}

      <Card title="Lifecycle">
        <LifecycleButtons status={live.status} />
        <p className="text-xs text-slate-500">
          Your agents share one gateway: starting or stopping it affects all of them.
        </p>
      </Card>

      <div className="grid gap-6 md:grid-cols-2">
        <Card title="Details">
          <dl>
            <Row label="Id">
              <code>{agent.id}</code>
            </Row>
            <Row label="Model">
              <code>{agent.model}</code>
            </Row>
            <Row label="Tier">{agent.tier}</Row>
            <Row label="Plan">{agent.plan ?? "—"}</Row>
            <Row label="Model source">
              <span data-testid="model-source">
                {[
                  ...page.modelSource.ownKeys.map((p) => `your ${p} key`),
                  ...page.modelSource.platform.map((p) =>
                    p.local ? `local server (${p.provider} API)` : `server's ${p.provider} key`,
                  ),
                ].join(", ") || "none"}
              </span>
            </Row>
            <Row label="Address">{agent.url}</Row>
            <Row label="Gateway version">{agent.gatewayVersion}</Row>
            <Row label="Storage">
              <StorageFigure storage={agent.storage} />
            </Row>
            <Row label="Started">
              {agent.startedAt ? new Date(agent.startedAt).toUTCString() : "—"}
            </Row>
            <Row label="Created">{new Date(agent.createdAt).toUTCString()}</Row>
          </dl>
        </Card>
        <Card title="Stats">
          <StatsCard live={polled} />
          <p className="text-xs text-slate-500">Refreshes every few seconds.</p>
        </Card>
      </div>

      <Card title="Verification">
        <VerificationPanel
          agentId={agent.id}
          verification={verification}
          securityKeyIds={page.securityKeyIds}
        />
      </Card>

      <p className="text-sm text-slate-600">
        Name, model, persona, who may talk to it, heartbeat and the full configuration are on the{" "}
        <Link to={`/agents/${agent.id}/settings`} className="text-indigo-700 underline">
          Settings
        </Link>{" "}
        tab.
      </p>

      <Card title="Backups">
        <BackupsPanel agentId={agent.id} backups={page.backups} />
      </Card>

      <Card title="Delete agent">
        {searchParams.get("confirm") === "delete" ? (
          <Form method="post" className="space-y-3" data-testid="confirm-delete">
            <p className="text-sm">
              Delete <strong>{agent.name}</strong> for good? Its configuration and messages go with
              it. If it is your last agent, its gateway, stored state and channel connections are
              removed too.
            </p>
            <input type="hidden" name="intent" value="delete" />
            <input type="hidden" name="confirm" value="yes" />
            <div className="flex items-center gap-4">
              <button
                type="submit"
                className="rounded-md bg-red-700 px-3 py-1.5 text-sm font-medium text-white"
              >
                Yes, delete {agent.name}
              </button>
              <Link to={`/agents/${agent.id}`} className="text-sm underline">
                Cancel
              </Link>
            </div>
          </Form>
        ) : (
          <Form method="get">
            <input type="hidden" name="confirm" value="delete" />
            <button
              type="submit"
              className="rounded-md border border-red-300 bg-white px-3 py-1.5 text-sm text-red-700"
            >
              Delete agent…
            </button>
          </Form>
        )}
      </Card>

      <Card title="Messages">
        {messages.total === 0 ? (
          <p className="text-sm text-slate-600">No messages yet.</p>
        ) : (
          <>
            <ul className="divide-y divide-slate-100 text-sm" data-testid="messages">
              {messages.messages.map((m) => (
                <li key={m.id} className="py-2">
                  <span className="mr-2 text-xs text-slate-500">
                    {new Date(m.timestamp).toUTCString()} · {m.platform} · {m.sender}
                  </span>
                  <span className="whitespace-pre-wrap">{m.content}</span>
                </li>
              ))}
            </ul>
            <nav aria-label="Message pages" className="flex items-center gap-4 text-sm">
              <span className="text-slate-500">
                {messages.offset + 1}–{shownTo} of {messages.total}
              </span>
              {messages.offset > 0 ? (
                <Link
                  to={pageLink(Math.max(0, messages.offset - messages.limit))}
                  className="text-indigo-700 underline"
                >
                  Newer
                </Link>
              ) : null}
              {shownTo < messages.total ? (
                <Link to={pageLink(shownTo)} className="text-indigo-700 underline">
                  Older
                </Link>
              ) : null}
            </nav>
          </>
        )}
      </Card>
    </div>
  );
}
