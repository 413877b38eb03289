import { operatorEmails } from "../platform/env.server.ts";

// The user as the services see it, and as the API shows it (the contract's User resource).

export interface User {
  id: string;
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
  email: string;
  name: string;
  plan: string;
  avatar_url: string | null;
  email_verified: boolean;
  password_hash: string | null;
  referral_code: string;
  created_at: Date;
  is_operator: boolean;
  suspended_at: Date | null;
  /** Read by the credential lookups: `(select plan from plan_assignments …) as assigned_plan`. */
  assigned_plan?: string | null;
}

export const toUser = (r: UserRow): User => ({
  id: r.id,
  email: r.email,
  name: r.name,
  plan: r.plan,
  avatarUrl: r.avatar_url,
  emailVerified: r.email_verified,
  hasPassword: r.password_hash !== null,
  referralCode: r.referral_code,
  createdAt: r.created_at,
  // A listed address counts only once its mailbox is proven: anyone can register any address
  // (docs/decisions/0196).
  isOperator: r.is_operator || (r.email_verified && operatorEmails().has(r.email.toLowerCase())),
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
