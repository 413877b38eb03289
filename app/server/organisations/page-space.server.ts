import type { User } from "../accounts/model.server.ts";
import { guardAction, requirePageSession } from "../accounts/pages.server.ts";
import type { ResolvedSession } from "../accounts/sessions.server.ts";
import { env } from "../platform/env.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { organisationActing } from "./acting.server.ts";
import { listMemberships } from "./organisations.server.ts";
import { allows, PERMISSIONS, type Permission, type Role } from "./roles.server.ts";

// The space a page acts in (decision 0203): the signed-in person's own, or an organisation of
// theirs chosen with the switcher (the `__space` cookie). The pages' counterpart of the API's
// X-Organization: a page's loader or action asks for its owner with the permission it needs,
// and gets the organisation as `user` (and the person as `person`) exactly as an API handler
// does, so the services it calls need no change.

export const SPACE_COOKIE = "__space";

export interface PageOwner extends ResolvedSession {
  /** The person signed in (`user` is the owner acted for). */
  person: User;
  organisation?: { id: string; name: string; role: Role };
}

function spaceOf(request: Request): string | undefined {
  const header = request.headers.get("cookie") ?? "";
  for (const part of header.split(";")) {
    const [name, ...rest] = part.trim().split("=");
    if (name === SPACE_COOKIE) {
      const value = decodeURIComponent(rest.join("="));
      return /^org_[A-Za-z0-9]{1,40}$/.test(value) ? value : undefined;
    }
  }
  return undefined;
}

/**
 * The owner a page acts for, its person and role; a stale space (no longer a member) is the
 * person's own. A role without `permission` gets a 403 page naming what it may not do.
 */
export async function pageOwner(request: Request, permission: Permission): Promise<PageOwner> {
  const session = await requirePageSession(request);
  const personal: PageOwner = { ...session, person: session.user };
  const space = spaceOf(request);
  if (!space) return personal;
  const acting = await organisationActing(space, session.user.id);
  if (!acting) return personal;
  if (!allows(acting.role, permission)) {
    throw new Response(
      `Your role in ${acting.organisation.name} (${acting.role}) may not ${PERMISSIONS[permission]}.`,
      { status: 403, headers: { "Content-Type": "text/plain; charset=utf-8" } },
    );
  }
  return {
    ...session,
    user: acting.organisation,
    person: session.user,
    organisation: { id: space, name: acting.organisation.name, role: acting.role },
  };
}

/** Refuses (a form's 403) when the page acts for an organisation whose role lacks `permission`. */
export function requireAllowed(owner: PageOwner, permission: Permission): void {
  const org = owner.organisation;
  if (org && !allows(org.role, permission)) {
    throw new DomainError(
      403,
      `Your role in ${org.name} (${org.role}) may not ${PERMISSIONS[permission]}`,
    );
  }
}

/**
 * A page action's `access` acting for the page's owner with `permission`:
 * `access: (args) => ownerMay("agents.chat", args)` (an arrow, not a call: the browser build
 * drops this module, and only a function that is never called there survives it).
 */
export async function ownerMay(
  permission: Permission,
  { request }: { request: Request },
): Promise<PageOwner> {
  guardAction(request);
  return pageOwner(request, permission);
}

/** What the switcher shows: the current space and the person's organisations. */
export async function pageSpaces(request: Request, person: User) {
  const memberships = await listMemberships(person.id);
  const space = spaceOf(request);
  const current = memberships.find((m) => m.organisation.id === space);
  return {
    current: current ? { id: current.organisation.id, name: current.organisation.name } : null,
    organisations: memberships.map((m) => ({
      id: m.organisation.id,
      name: m.organisation.name,
      role: m.role,
    })),
  };
}

/** The Set-Cookie that switches to `space` (an organisation id, or null for the person's own). */
export function spaceCookie(space: string | null): string {
  const secure = env().APP_URL.startsWith("https:") ? "; Secure" : "";
  return space
    ? `${SPACE_COOKIE}=${encodeURIComponent(space)}; Path=/; HttpOnly; SameSite=Lax${secure}`
    : `${SPACE_COOKIE}=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0${secure}`;
}
