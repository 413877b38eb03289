import { NavLink } from "@remix-run/react";

// The agent's tabs (issue 25: chat first). Each is its own URL, so they work without
// JavaScript; NavLink marks the current one with aria-current="page".

const TABS = [
  { to: "chat", label: "Chat" },
  { to: "", label: "Status" },
  { to: "settings", label: "Settings" },
  { to: "skills", label: "Skills" },
  { to: "channels", label: "Channels & keys" },
  { to: "logs", label: "Logs" },
] as const;

export function AgentTabs({ agentId }: { agentId: string }) {
  const base = `/agents/${encodeURIComponent(agentId)}`;
  return (
    <nav aria-label="Agent" className="border-b border-slate-200">
      <ul className="-mb-px flex flex-wrap gap-1 text-sm">
        {TABS.map((t) => (
          <li key={t.label}>
            <NavLink
              to={t.to ? `${base}/${t.to}` : base}
              end
              className={({ isActive }) =>
                isActive
                  ? "inline-block border-b-2 border-indigo-700 px-3 py-2 font-medium text-indigo-800"
                  : "inline-block border-b-2 border-transparent px-3 py-2 text-slate-700 hover:border-slate-300"
              }
            >
              {t.label}
            </NavLink>
          </li>
        ))}
      </ul>
    </nav>
  );
}
