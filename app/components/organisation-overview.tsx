import type { Overview } from "../server/organisations/overview.server.ts";
import { Card } from "./forms.tsx";
import { formatMicroUsd } from "./money.ts";
import { SpendByMemberAndAgent } from "./organisation-spend.tsx";

// The organisation page's mission-control section (decision 0207): its agents and their state,
// its model spend this month, and (audit.read) its latest audit entries. Members are the page's
// own Members section.

const monthOf = (iso: string) =>
  new Date(iso).toLocaleDateString("en-GB", { month: "long", year: "numeric", timeZone: "UTC" });

export function MissionControl({ overview }: { overview: Overview }) {
  const { agents, spend, audit } = overview;
  return (
    <Card title="Mission control">
      <div className="space-y-2">
        <h3 className="font-medium">Agents</h3>
        {agents.length === 0 ? (
          <p className="text-sm text-slate-600">No agents yet.</p>
        ) : (
          <table className="w-full text-left text-sm">
            <thead className="text-slate-500">
              <tr>
                <th className="py-2">Agent</th>
                <th>Model</th>
                <th>Status</th>
                <th>Awake</th>
              </tr>
            </thead>
            <tbody className="divide-y divide-slate-100">
              {agents.map((a) => (
                <tr key={a.id}>
                  <td className="py-2 font-medium">
                    <a href={`/agents/${a.id}`} className="text-indigo-700 underline">
                      {a.name}
                    </a>
                  </td>
                  <td>{a.model}</td>
                  <td>{a.status}</td>
                  <td>{a.wake}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </div>
      <div className="space-y-1">
        <h3 className="font-medium">Spend in {monthOf(spend.since)}</h3>
        <p className="text-sm">
          <strong>{formatMicroUsd(spend.costMicroUsd, 2)}</strong> on {spend.calls} model{" "}
          {spend.calls === 1 ? "call" : "calls"} (UTC month to date).
        </p>
        {spend.perMember && spend.perAgent ? (
          <>
            <SpendByMemberAndAgent members={spend.perMember} agents={spend.perAgent} />
            <a
              href={`/organizations/${overview.organisation.id}/usage`}
              className="text-sm text-indigo-700 underline"
            >
              Spend over another period
            </a>
          </>
        ) : null}
      </div>
      {audit ? (
        <div className="space-y-2">
          <h3 className="font-medium">Latest activity</h3>
          {audit.length === 0 ? (
            <p className="text-sm text-slate-600">Nothing recorded yet.</p>
          ) : (
            <table className="w-full text-left text-sm">
              <thead className="text-slate-500">
                <tr>
                  <th className="py-2">When (UTC)</th>
                  <th>Who</th>
                  <th>What</th>
                  <th>Target</th>
                </tr>
              </thead>
              <tbody className="divide-y divide-slate-100">
                {audit.map((e) => (
                  <tr key={e.id}>
                    <td className="py-2">{e.at.slice(0, 19).replace("T", " ")}</td>
                    <td>{e.actorId ?? e.actorType}</td>
                    <td>
                      {e.action}
                      {e.outcome === "failure" ? " (failed)" : ""}
                    </td>
                    <td>{e.target ?? ""}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </div>
      ) : null}
    </Card>
  );
}
