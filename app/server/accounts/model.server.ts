import { operatorEmails } from "../platform/env.server.ts";

// The user as the services see it, and as the API shows it (the contract's User resource).

export interface User {
  id: string;
  /** A person, or an organisation (an owner people act for as members; decision 0203). */
  kind: "person" | "organisation";
  /** "" for an organisation, which has none. */
  email: string;
  name: string;
  plan: string;
  avatarUrl: string | null;
  emailVerified: boolean;
  hasPassword: boolean;
  referralCode: string;
  createdAt: Date;
  /**
   * Operator of this platform (the row's flag, or a *verified* email in OPERATOR_EMAILS); never
   * in the public API.
   */
  isOperator: boolean;
  suspendedAt: Date | null;
  /**
   * The plan an operator assigned (plan_assignments), null for none; present only when the user
   * was read with it (the credential lookups, so that a cached credential answers the user's
   * plan without a query). Undefined: not read.
   */
  assignedPlan?: string | null;
}

export interface UserRow {
  id: string;
  kind: "person" | "organisation";
  /** null for an organisation (migration 0106). */
  email: string | null;
  name: string;
  plan: string;
  avatar_url: string | null;
  email_verified: boolean;
  password_hash: string | null;
  /** null for an organisation. */
  referral_code: string | null;
  created_at: Date;
  is_operator: boolean;
  suspended_at: Date | null;
  /** Read by the credential lookups: `(select plan from plan_assignments …) as assigned_plan`. */
  assigned_plan?: string | null;
}

/** A person's row: the only kind with an email and a referral code (migration 0106). */
export type PersonRow = UserRow & { kind: "person"; email: string; referral_code: string };

/** The row as a person's, or undefined for an organisation's. */
export const asPerson = (r: UserRow | undefined): PersonRow | undefined =>
  r && r.kind !== "organisation" && r.email !== null ? (r as PersonRow) : undefined;

export const toUser = (r: UserRow): User => ({
  id: r.id,
  kind: r.kind ?? "person",
  email: r.email ?? "",
  name: r.name,
  plan: r.plan,
  avatarUrl: r.avatar_url,
  emailVerified: r.email_verified,
  hasPassword: r.password_hash !== null,
  referralCode: r.referral_code ?? "",
  createdAt: r.created_at,
  // A listed address counts only once its mailbox is proven: anyone can register any address
  // (docs/decisions/0196).
  isOperator:
    r.is_operator ||
    (r.email !== null && r.email_verified && operatorEmails().has(r.email.toLowerCase())),
  suspendedAt: r.suspended_at,
  ...(r.assigned_plan !== undefined ? { assignedPlan: r.assigned_plan } : {}),
});

/** The contract's User resource. */
export const publicUser = (u: User) => ({
  id: u.id,
  email: u.email,
  name: u.name,
  plan: u.plan,
  createdAt: u.createdAt.toISOString(),
});
