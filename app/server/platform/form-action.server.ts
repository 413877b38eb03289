import type { SubmissionResult } from "@conform-to/react";
import { parseWithZod } from "@conform-to/zod/v4";
import { type ActionFunctionArgs, data } from "@remix-run/node";
import type { z } from "zod";
import { DATABASE_UNAVAILABLE, isDatabaseUnavailable } from "./db-unavailable.server.ts";
import { DomainError, domainErrorStatus } from "./errors.server.ts";

// The one way to write a page action (docs/decisions/0095): check access, parse the form with
// conform + zod (several forms on a page: a discriminated union on `intent`), run the handler,
// and answer every refusal with conform's reply, so the page shows field and form errors with
// or without JavaScript. DomainErrors get the API route builder's status; a handler's Response
// (a redirect) is thrown to Remix; anything else is a bug and goes to the error boundary.
// Routes write `export const action = /* @__PURE__ */ formAction({...})` with a schema that is
// client-safe or imported from a .server module: the browser build then drops the call (this
// module is empty there).

/** What every page action answers (useActionData). */
export interface FormReply<T> {
  /** conform's reply: `useForm({ lastResult })`, or FormMessages for plain forms. */
  result: SubmissionResult<string[]>;
  /** The submitted intent, so a page with several forms answers next to the right one. */
  intent: string | null;
  /** The form-level errors as one line, for plain forms; null on success. */
  error: string | null;
  /** The handler's answer; null when the submission was refused. */
  value: T | null;
}

export interface FormActionContext<V, A> extends ActionFunctionArgs {
  value: V;
  /** What `access` returned (the page session, for signed-in pages). */
  session: A;
}

export interface FormActionSpec<S extends z.ZodType, A, T> {
  /** A z.object, or z.discriminatedUnion("intent", [...]) for a page with several forms. */
  schema: S;
  /** Runs before the form is read: the same-origin check, the session (throw a Response). */
  access: (args: ActionFunctionArgs) => A | Promise<A>;
  /**
   * Fields whose errors the page shows next to the field; a DomainError "field: message" or a
   * schema error on any other field (hidden inputs, plain forms) lands on the form instead.
   */
  fields?: readonly string[];
  /** Clear the form after success (true, or only for these intents). */
  resetForm?: boolean | readonly string[];
  handler(ctx: FormActionContext<z.output<S>, A>): Promise<T | Response> | T | Response;
}

const FIELD_MESSAGE = /^(\w+): (.+)$/;

type Errors = Record<string, string[] | null>;

/** Moves errors of fields the page does not show onto the form, "field: message". */
function shownErrors(error: Errors | null | undefined, fields: readonly string[]): Errors | null {
  if (!error) return null;
  const out: Errors = {};
  const form: string[] = [...(error[""] ?? [])];
  for (const [name, messages] of Object.entries(error)) {
    if (name === "" || !messages?.length) continue;
    if (fields.includes(name)) out[name] = messages;
    else if (name === "intent") form.push("Unknown action");
    else form.push(...messages.map((m) => `${name}: ${m}`));
  }
  if (form.length) out[""] = form;
  return out;
}

export function formAction<S extends z.ZodType, A, T>(spec: FormActionSpec<S, A, T>) {
  const fields = spec.fields ?? [];
  return async (args: ActionFunctionArgs) => {
    const session = await spec.access(args);
    const formData = await args.request.formData();
    const submission = parseWithZod(formData, { schema: spec.schema });
    const intent = typeof submission.payload.intent === "string" ? submission.payload.intent : null;
    const refuse = (status: number, result: SubmissionResult<string[]>) => {
      const error = shownErrors(result.error, fields);
      return data<FormReply<Exclude<T, Response>>>(
        {
          result: { ...result, ...(error ? { error } : {}) },
          intent,
          error: error?.[""]?.join("; ") ?? null,
          value: null,
        },
        { status },
      );
    };
    if (submission.status !== "success") return refuse(400, submission.reply());
    let value: T | Response;
    try {
      value = await spec.handler({ ...args, value: submission.value, session });
    } catch (thrown) {
      // A database that is away is a 503 the page shows, not the error page (decision 0223).
      const error = isDatabaseUnavailable(thrown)
        ? new DomainError(503, DATABASE_UNAVAILABLE)
        : thrown;
      if (!(error instanceof DomainError)) throw error;
      const m = FIELD_MESSAGE.exec(error.message);
      const result =
        m && fields.includes(m[1]!)
          ? submission.reply({ fieldErrors: { [m[1]!]: [m[2]!] } })
          : submission.reply({ formErrors: [error.message] });
      return refuse(domainErrorStatus(error), result);
    }
    if (value instanceof Response) throw value;
    // Narrowing a generic by instanceof leaves T as is: the Response case is gone here.
    const answer = value as Exclude<T, Response>;
    const reset =
      spec.resetForm === true ||
      (Array.isArray(spec.resetForm) && intent !== null && spec.resetForm.includes(intent));
    return data<FormReply<Exclude<T, Response>>>({
      result: submission.reply(reset ? { resetForm: true } : {}),
      intent,
      error: null,
      value: answer,
    });
  };
}
