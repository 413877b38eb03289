import { instanceStatusOf, listAgentSummaryRows } from "../agents/agents.server.ts";
import { agentStatus, type StatusFields } from "../agents/instances.server.ts";
import { type MonthSpend, monthSpend } from "../ai/month-spend.server.ts";
import { type AuditEntry, listAudit } from "../platform/audit.server.ts";
import { db } from "../platform/db.server.ts";
import { listMembers, type Member, requirePermission } from "./organisations.server.ts";
import { allows, type Role } from "./roles.server.ts";
import {
  type AgentSpend,
  currentMonth,
  type MemberSpend,
  organisationSpend,
} from "./spend.server.ts";

// The mission-control view of an organisation (issue 48, decision 0207): its agents and their
// state, its model spend this month, its members and, for roles that may read it, the latest of
// its audit log. One read for the page and GET /api/organizations/:id/overview.

/** How many audit entries the view shows (the audit log's own API pages through the rest). */
export const OVERVIEW_AUDIT_ENTRIES = 20;

export interface OverviewAgent {
  id: string;
  name: string;
  model: string;
  /** The contract's status (running, stopped, error, provisioning, sleeping…). */
  status: string;
  /** awake: its gateway runs; asleep: put to sleep while idle, woken by the next message. */
  wake: "awake" | "asleep" | "off";
}

export interface Overview {
  organisation: { id: string; name: string };
  role: Role;
  agents: OverviewAgent[];
  spend: MonthSpend & {
    /** This month by member and by agent (decision 0215); null for a role without billing.read. */
    perMember: MemberSpend[] | null;
    perAgent: AgentSpend[] | null;
  };
  members: Member[];
  /** The latest entries, newest first; null when the role may not read the audit log. */
  audit: AuditEntry[] | null;
}

function wakeOf(instance: StatusFields | undefined): OverviewAgent["wake"] {
  if (instance?.observed_state === "sleeping") return "asleep";
  if (instance?.observed_state === "running") return "awake";
  return "off";
}

/** agents.read (every role); the audit entries need audit.read. 404 for a non-member. */
export async function organisationOverview(
  organisationId: string,
  personId: string,
): Promise<Overview> {
  const { organisation, role } = await requirePermission(
    organisationId,
    personId,
    "agents.read",
    db(),
  );
  const [rows, spend, split, members, audit] = await Promise.all([
    listAgentSummaryRows(organisationId),
    monthSpend(organisationId),
    allows(role, "billing.read")
      ? organisationSpend(organisationId, personId, currentMonth())
      : Promise.resolve(null),
    listMembers(organisationId, personId),
    allows(role, "audit.read")
      ? listAudit({ userId: organisationId, limit: OVERVIEW_AUDIT_ENTRIES }).then((p) => p.entries)
      : Promise.resolve(null),
  ]);
  return {
    organisation: { id: organisation.id, name: organisation.name },
    role,
    agents: rows.map((row) => {
      const instance = instanceStatusOf(row);
      return {
        id: row.id,
        name: row.name,
        model: row.model,
        status: agentStatus(instance),
        wake: wakeOf(instance),
      };
    }),
    spend: { ...spend, perMember: split?.members ?? null, perAgent: split?.agents ?? null },
    members,
    audit,
  };
}
