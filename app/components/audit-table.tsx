import type { AuditEntry } from "../server/platform/audit.server.ts";

// The audit log as a table (the settings page and the operator console).

const detailText = (details: AuditEntry["details"]) =>
  Object.entries(details)
    .map(([k, v]) => `${k}: ${v === null ? "—" : String(v)}`)
    .join(", ");

export function AuditTable({
  entries,
  showUser = false,
}: {
  entries: AuditEntry[];
  showUser?: boolean;
}) {
  if (entries.length === 0) return <p className="text-sm text-slate-600">No entries.</p>;
  return (
    <div className="overflow-x-auto">
      <table className="w-full text-left text-sm">
        <thead className="text-slate-500">
          <tr>
            <th className="py-1 pr-3">Time (UTC)</th>
            {showUser ? <th className="py-1 pr-3">Account</th> : null}
            <th className="py-1 pr-3">Action</th>
            <th className="py-1 pr-3">Outcome</th>
            <th className="py-1 pr-3">Actor</th>
            <th className="py-1 pr-3">IP</th>
            <th className="py-1 pr-3">Target</th>
            <th className="py-1">Details</th>
          </tr>
        </thead>
        <tbody>
          {entries.map((e) => (
            <tr key={e.id} className="border-t border-slate-100 align-top">
              <td className="py-1 pr-3 whitespace-nowrap">{e.at.replace("T", " ").slice(0, 19)}</td>
              {showUser ? <td className="py-1 pr-3">{e.userId ?? "—"}</td> : null}
              <td className="py-1 pr-3 font-mono">{e.action}</td>
              <td className={`py-1 pr-3 ${e.outcome === "failure" ? "text-red-700" : ""}`}>
                {e.outcome}
              </td>
              <td className="py-1 pr-3">
                {e.actorType}
                {e.actorId ? ` ${e.actorId}` : ""}
              </td>
              <td className="py-1 pr-3">{e.ip ?? "—"}</td>
              <td className="py-1 pr-3">{e.target ?? "—"}</td>
              <td className="py-1">{detailText(e.details)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
