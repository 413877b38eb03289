import { type LoaderFunctionArgs, type MetaFunction, redirect } from "@remix-run/node";
import { Form, Link, useActionData, useLoaderData } from "@remix-run/react";
import { z } from "zod";
import { Card, Notice, Submit } from "../components/forms.tsx";
import { pageSession, signedIn } from "../server/accounts/pages.server.ts";
import { acceptInvitation, invitationPreview } from "../server/organisations/invitations.server.ts";
import { spaceCookie } from "../server/organisations/page-space.server.ts";
import { formAction } from "../server/platform/form-action.server.ts";

// An invitation's link (decision 0204): who invites whom to what, and the way in: accept when
// signed in with the invited email, else sign in or sign up with it.

export const meta: MetaFunction = () => [{ title: "Invitation — Agent Platform" }];

export async function loader({ request, params }: LoaderFunctionArgs) {
  const token = params.token ?? "";
  const invitation = await invitationPreview(token);
  if (!invitation) throw new Response("This invitation does not exist", { status: 404 });
  const session = await pageSession(request);
  return {
    token,
    invitation,
    signedInAs: session?.user.email ?? null,
    here: new URL(request.url).pathname,
  };
}

export const action = /* @__PURE__ */ formAction({
  schema: z.object({ intent: z.literal("accept") }),
  access: signedIn,
  handler: async ({ session: { user }, params }) => {
    const membership = await acceptInvitation(params.token ?? "", user);
    return redirect("/agents", {
      status: 303,
      headers: { "Set-Cookie": spaceCookie(membership.organisation.id) },
    });
  },
});

export default function InvitationPage() {
  const { token, invitation, signedInAs, here } = useLoaderData<typeof loader>();
  const error = useActionData<typeof action>()?.error;
  const pending = invitation.state === "pending";
  const matches = signedInAs?.toLowerCase() === invitation.email.toLowerCase();
  return (
    <div className="mx-auto max-w-md space-y-6">
      <h1 className="text-2xl font-semibold">Join {invitation.organisation.name}</h1>
      <Card title="Invitation">
        <p className="text-sm text-slate-700">
          {invitation.email} is invited as <strong>{invitation.role}</strong>.
        </p>
        {!pending ? (
          <Notice>This invitation is {invitation.state}: ask for a new one.</Notice>
        ) : matches ? (
          <Form method="post" className="mt-4 space-y-2">
            <input type="hidden" name="intent" value="accept" />
            {error ? (
              <p role="alert" className="text-sm text-red-700">
                {error}
              </p>
            ) : null}
            <Submit>Accept and join</Submit>
          </Form>
        ) : (
          <div className="mt-4 space-y-2 text-sm">
            {signedInAs ? (
              <p>
                You are signed in as {signedInAs}; this invitation is for {invitation.email}. Sign
                out and sign in with that account.
              </p>
            ) : null}
            <p>
              <Link
                to={`/signin?redirectTo=${encodeURIComponent(here)}`}
                className="text-indigo-700 underline"
              >
                Sign in as {invitation.email}
              </Link>{" "}
              or{" "}
              <Link
                to={`/signup?invitation=${encodeURIComponent(token)}&email=${encodeURIComponent(invitation.email)}`}
                className="text-indigo-700 underline"
              >
                create the account
              </Link>
              .
            </p>
          </div>
        )}
      </Card>
    </div>
  );
}
