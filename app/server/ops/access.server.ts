import { redirect } from "@remix-run/node";
import type { z } from "zod";
import type { User } from "../accounts/model.server.ts";
import { guardAction, requirePageSession } from "../accounts/pages.server.ts";
import { withAuditScope } from "../platform/audit.server.ts";
import { clientIp } from "../platform/client-ip.server.ts";
import { formAction } from "../platform/form-action.server.ts";

// Who may use the operator console, and how its actions are recorded. Every /ops loader and
// action calls requireOperator first: signed out goes to sign-in, a signed-in non-operator
// gets 403. docs/decisions/0104-operators.md

export async function requireOperator(request: Request): Promise<User> {
  const { user } = await requirePageSession(request);
  if (!user.isOperator) throw new Response("Operators only", { status: 403 });
  return user;
}

/** Runs a console action so its audit entries name the operator (and the client IP). */
export function asOperator<T>(
  operator: User,
  args: { request: Request; context: { remoteAddress?: string | undefined } },
  fn: () => Promise<T>,
): Promise<T> {
  return withAuditScope(
    {
      actor: { type: "operator", id: operator.id, userId: operator.id },
      ip: clientIp(args.request, args.context.remoteAddress),
    },
    fn,
  );
}

/** The console's action access: same-origin post, then an operator (403 otherwise). */
export async function operatorAction({ request }: { request: Request }): Promise<User> {
  guardAction(request);
  return requireOperator(request);
}

/**
 * A console action on the one page-action helper: the operator's access, the form's zod schema
 * (a union discriminated on `intent`), the handler under the operator's audit scope, then a
 * redirect to the path it returns (with its notice). Refusals answer {error} with the
 * DomainError's status.
 */
export function opsAction<S extends z.ZodType>(spec: {
  schema: S;
  handler: (
    value: z.output<S>,
    ctx: { operator: User; params: Record<string, string | undefined> },
  ) => Promise<string>;
}) {
  return formAction({
    schema: spec.schema,
    access: operatorAction,
    handler: async (args) => {
      const to = await asOperator(args.session, args, () =>
        spec.handler(args.value, { operator: args.session, params: args.params }),
      );
      return redirect(to, 303);
    },
  });
}
