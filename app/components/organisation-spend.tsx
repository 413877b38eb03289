import type { AgentSpend, MemberSpend } from "../server/organisations/spend.server.ts";
import { formatMicroUsd } from "./money.ts";

// Spend by member and by agent (decision 0215): the organisation's usage page and its
// mission-control section. A null person or agent is spend nobody can be named for.

// Channel messages and heartbeats name their agent but no person (decision 0225).
const NO_MEMBER = "No member (chat-channel messages, heartbeats, before attribution began)";
const NO_AGENT = "Not attributed (before attribution began)";

function memberLabel(m: MemberSpend): string {
  if (!m.userId) return NO_MEMBER;
  const who = m.name ?? m.userId;
  return m.member ? who : `${who} (no longer a member)`;
}

const agentLabel = (a: AgentSpend) => (a.agentId ? (a.name ?? `${a.agentId} (deleted)`) : NO_AGENT);

function SpendTable({
  caption,
  rows,
}: {
  caption: string;
  rows: Array<{ key: string; label: string; calls: number; cost: number; credits: number }>;
}) {
  return (
    <table className="w-full text-left text-sm">
      <caption className="py-1 text-left font-medium">{caption}</caption>
      <thead className="text-slate-500">
        <tr>
          <th className="py-2">{caption.startsWith("By member") ? "Member" : "Agent"}</th>
          <th className="text-right">Calls</th>
          <th className="text-right">Cost</th>
          <th className="text-right">Credits used</th>
        </tr>
      </thead>
      <tbody className="divide-y divide-slate-100">
        {rows.length === 0 ? (
          <tr>
            <td colSpan={4} className="py-2 text-slate-600">
              No model calls in this period.
            </td>
          </tr>
        ) : (
          rows.map((r) => (
            <tr key={r.key}>
              <td className="py-2">{r.label}</td>
              <td className="text-right">{r.calls}</td>
              <td className="text-right">{formatMicroUsd(r.cost, 2)}</td>
              <td className="text-right">{formatMicroUsd(r.credits, 2)}</td>
            </tr>
          ))
        )}
      </tbody>
    </table>
  );
}

export function SpendByMemberAndAgent({
  members,
  agents,
}: {
  members: MemberSpend[];
  agents: AgentSpend[];
}) {
  return (
    <div className="space-y-4">
      <SpendTable
        caption="By member"
        rows={members.map((m) => ({
          key: m.userId ?? "-",
          label: memberLabel(m),
          calls: m.calls,
          cost: m.costMicroUsd,
          credits: m.creditsMicroUsd,
        }))}
      />
      <SpendTable
        caption="By agent"
        rows={agents.map((a) => ({
          key: a.agentId ?? "-",
          label: agentLabel(a),
          calls: a.calls,
          cost: a.costMicroUsd,
          credits: a.creditsMicroUsd,
        }))}
      />
    </div>
  );
}
