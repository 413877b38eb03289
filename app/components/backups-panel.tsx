import { Form, useNavigation } from "@remix-run/react";
import type { BackupView } from "../server/agents/backups.server.ts";
import { Submit } from "./forms.tsx";

// The agent page's backups: take one, and per backup its size, time, reason and status, with
// download, restore and delete (plain forms: they work without JavaScript).

const size = (bytes: number | null) =>
  bytes === null
    ? "—"
    : bytes >= 1024 ** 2
      ? `${(bytes / 1024 ** 2).toFixed(1)} MiB`
      : `${Math.ceil(bytes / 1024)} KiB`;

const reasons: Record<string, string> = {
  manual: "on demand",
  scheduled: "scheduled",
  "pre-update": "before an update",
  "pre-restore": "before a restore",
  imported: "imported",
  "pre-delete": "before deletion",
  "node-returned": "left on a host that came back",
};

export function BackupsPanel({ agentId, backups }: { agentId: string; backups: BackupView[] }) {
  const busyIntent = useNavigation().formData?.get("intent");
  const base = `/api/agents/${encodeURIComponent(agentId)}/backups`;
  return (
    <div className="space-y-3">
      <Form method="post">
        <input type="hidden" name="intent" value="backup" />
        <Submit busy={busyIntent === "backup"}>Back up now</Submit>
      </Form>
      <Form method="post">
        <input type="hidden" name="intent" value="clone" />
        <Submit busy={busyIntent === "clone"}>Clone this agent</Submit>
      </Form>
      <p className="text-xs text-slate-500">
        A clone is a new agent with this one's memory, workspace, configuration and messages; it
        counts towards your plan's agent limit.
      </p>
      <p className="text-xs text-slate-500">
        A backup holds your gateway's state (sessions, memory, workspace, skills) and this agent's
        configuration, messages and channel credentials, encrypted. A restore boots the gateway on
        the backup and keeps the current state until it is healthy.
      </p>
      {backups.length === 0 ? (
        <p className="text-sm text-slate-600">No backups yet.</p>
      ) : (
        <ul className="divide-y divide-slate-100 text-sm" data-testid="backups">
          {backups.map((b) => (
            <li key={b.id} className="flex flex-wrap items-center gap-3 py-2">
              <span>{new Date(b.createdAt).toUTCString()}</span>
              <span className="text-slate-500">{reasons[b.reason] ?? b.reason}</span>
              <span className="text-slate-500">{size(b.sizeBytes)}</span>
              <span className={b.status === "failed" ? "text-red-700" : "text-slate-700"}>
                {b.status}
                {b.error ? `: ${b.error}` : ""}
              </span>
              {b.restore ? (
                <span className={b.restore.status === "failed" ? "text-red-700" : "text-slate-700"}>
                  restore {b.restore.status}
                  {b.restore.error ? `: ${b.restore.error}` : ""}
                </span>
              ) : null}
              <span className="ml-auto flex items-center gap-2">
                {b.status === "ready" ? (
                  <>
                    <a
                      href={`${base}/${b.id}/download`}
                      className="text-indigo-700 underline"
                      download
                    >
                      Download
                    </a>
                    <Form method="post">
                      <input type="hidden" name="intent" value="restore" />
                      <input type="hidden" name="backupId" value={b.id} />
                      <button type="submit" className="text-indigo-700 underline">
                        Restore
                      </button>
                    </Form>
                  </>
                ) : null}
                <Form method="post">
                  <input type="hidden" name="intent" value="delete-backup" />
                  <input type="hidden" name="backupId" value={b.id} />
                  <button type="submit" className="text-red-700 underline">
                    Delete
                  </button>
                </Form>
              </span>
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}
