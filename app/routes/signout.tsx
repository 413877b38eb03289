import { type MetaFunction, redirect } from "@remix-run/node";
import { Form } from "@remix-run/react";
import { z } from "zod";
import { anyone, pageSession } from "../server/accounts/pages.server.ts";
import { clearSessionCookie, revokeSession } from "../server/accounts/sessions.server.ts";
import { formAction } from "../server/platform/form-action.server.ts";

export const meta: MetaFunction = () => [{ title: "Sign out — Agent Platform" }];

// A button without fields.
const noFields = z.object({});

export const action = /* @__PURE__ */ formAction({
  schema: noFields,
  access: anyone,
  handler: async ({ request }) => {
    const session = await pageSession(request);
    if (session) await revokeSession(session.user.id, session.sessionId);
    return redirect("/", { headers: { "Set-Cookie": await clearSessionCookie() } });
  },
});

/** GET shows a button: signing out changes state, so it is a POST. */
export default function SignOut() {
  return (
    <div className="mx-auto max-w-md space-y-4">
      <h1 className="text-2xl font-semibold">Sign out</h1>
      <Form method="post">
        <button
          type="submit"
          className="rounded-md bg-slate-800 px-4 py-2 text-sm font-medium text-white"
        >
          Sign out of this browser
        </button>
      </Form>
    </div>
  );
}
