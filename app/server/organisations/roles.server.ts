import { DomainError } from "../platform/errors.server.ts";

// What each role in an organisation may do: one table, enforced for every API route that acts
// for an organisation (the route declares its permission; app/server/accounts/auth.server.ts
// checks it) and for every open connection (agents/live-access.server.ts). A route that declares
// none acts for a person only and refuses an organisation. docs/decisions/0203.

export const ROLES = ["owner", "admin", "member", "viewer", "billing"] as const;
export type Role = (typeof ROLES)[number];

/** Every permission, with what it lets a member do (the refusal names it). */
export const PERMISSIONS = {
  "agents.read": "see the organisation's agents, their status, stats, logs and messages",
  "agents.chat": "chat with the organisation's agents",
  "agents.operate": "start, stop, restart, repair, update and back up the organisation's agents",
  "agents.configure": "change the organisation's agents' settings, model, memory and skills",
  "agents.provision": "create, clone, import and delete the organisation's agents",
  "credentials.manage": "set the organisation's channel tokens and model provider keys",
  "members.manage": "add and remove the organisation's members and change their roles",
  "billing.read": "see the organisation's plan, credits and usage",
  "billing.manage": "buy plans, credits and seats for the organisation",
  "audit.read": "read the organisation's audit log",
} as const;
export type Permission = keyof typeof PERMISSIONS;

const ALL = Object.keys(PERMISSIONS) as Permission[];

export const ROLE_PERMISSIONS: Record<Role, readonly Permission[]> = {
  // Owners and admins differ only in who may touch an owner (organisations.server.ts).
  owner: ALL,
  admin: ALL,
  member: ["agents.read", "agents.chat", "agents.operate", "agents.configure", "billing.read"],
  viewer: ["agents.read"],
  billing: ["agents.read", "billing.read", "billing.manage", "audit.read"],
};

export const isRole = (value: string): value is Role =>
  (ROLES as readonly string[]).includes(value);
export const isPermission = (value: string): value is Permission => value in PERMISSIONS;

export const allows = (role: Role, permission: Permission): boolean =>
  ROLE_PERMISSIONS[role].includes(permission);

/** 403 naming what the role may not do. */
export function refuseRole(role: Role, permission: Permission): DomainError {
  return new DomainError(
    403,
    `Your role in this organisation (${role}) does not allow this: it may not ${PERMISSIONS[permission]}`,
  );
}
