import { type ActionFunctionArgs, redirect } from "@remix-run/node";
import { guardAction, requirePageSession } from "../server/accounts/pages.server.ts";
import { membershipOf } from "../server/organisations/organisations.server.ts";
import { spaceCookie } from "../server/organisations/page-space.server.ts";
import { safeRedirect } from "../server/platform/safe-redirect.server.ts";

// The space switcher's form (the header): the person's own space or one of their
// organisations (decision 0203); back to the page it was posted from.

export async function action({ request }: ActionFunctionArgs) {
  guardAction(request);
  const session = await requirePageSession(request);
  const form = await request.formData();
  const space = String(form.get("space") ?? "personal");
  const next = safeRedirect(form.get("next"), "/agents");
  if (space === "personal") return redirect(next, { headers: { "Set-Cookie": spaceCookie(null) } });
  if (!(await membershipOf(space, session.user.id))) {
    throw new Response("Organisation not found", { status: 404 });
  }
  return redirect(next, { headers: { "Set-Cookie": spaceCookie(space) } });
}

export const loader = () => redirect("/agents");
