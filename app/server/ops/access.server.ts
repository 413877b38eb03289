import { parseWithZod } from "@conform-to/zod/v4";
import { type ActionFunctionArgs, data, redirect } from "@remix-run/node";
import type { z } from "zod";
import type { User } from "../accounts/model.server.ts";
import { guardAction, requirePageSession } from "../accounts/pages.server.ts";
import { withAuditScope } from "../platform/audit.server.ts";
import { clientIp } from "../platform/client-ip.server.ts";
import { DomainError } from "../platform/errors.server.ts";

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

// A console action: same-origin check, operator, the form parsed by its zod schema (a union
// discriminated on `intent`), the handler under the operator's audit scope, then a redirect
// back with a notice. Refusals answer {error} with the DomainError's status. Shaped like the
// page-action helper's spec (schema, handler) so it moves onto it when that lands.
export function opsAction<S extends z.ZodType>(spec: {
  schema: S;
  handler: (
    value: z.output<S>,
    ctx: { operator: User; params: Record<string, string | undefined> },
  ) => Promise<string>;
}) {
  return async (args: ActionFunctionArgs) => {
    guardAction(args.request);
    const operator = await requireOperator(args.request);
    const submission = parseWithZod(await args.request.formData(), { schema: spec.schema });
    if (submission.status !== "success") {
      const errors = Object.entries(submission.error ?? {})
        .map(([field, messages]) => `${field || "form"}: ${(messages ?? []).join(", ")}`)
        .join("; ");
      return data({ error: errors || "Invalid form" }, { status: 400 });
    }
    try {
      const to = await asOperator(operator, args, () =>
        spec.handler(submission.value, { operator, params: args.params }),
      );
      return redirect(to, 303);
    } catch (error) {
      if (!(error instanceof DomainError)) throw error;
      return data({ error: error.message }, { status: error.status });
    }
  };
}
