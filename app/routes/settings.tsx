import { getFormProps, useForm } from "@conform-to/react";
import { getZodConstraint, parseWithZod } from "@conform-to/zod/v4";
import {
  type ActionFunctionArgs,
  data,
  type LoaderFunctionArgs,
  type MetaFunction,
} from "@remix-run/node";
import { Form, useActionData, useLoaderData } from "@remix-run/react";
import type { z } from "zod";
import { Card, Errors, Field, Notice, Submit } from "../components/forms.tsx";
import { SecurityKeys } from "../components/security-keys.tsx";
import { changePasswordSchema, settingsSchema } from "../schemas/accounts.ts";
import { creditBalance } from "../server/accounts/credits.server.ts";
import {
  guardAction,
  replyWithError,
  requirePageSession,
} from "../server/accounts/pages.server.ts";
import { listSessions, revokeSession } from "../server/accounts/sessions.server.ts";
import { changePassword, updateProfile } from "../server/accounts/users.server.ts";
import {
  listWebauthnCredentials,
  removeWebauthnCredential,
} from "../server/identity/webauthn.server.ts";
import { DomainError } from "../server/platform/errors.server.ts";

export const meta: MetaFunction = () => [{ title: "Settings — Agent Platform" }];

export async function loader({ request }: LoaderFunctionArgs) {
  const { user, sessionId, setCookie } = await requirePageSession(request);
  const [sessions, credits, securityKeys] = await Promise.all([
    listSessions(user.id, sessionId),
    creditBalance(user.id),
    listWebauthnCredentials(user.id),
  ]);
  return data(
    {
      user: {
        email: user.email,
        name: user.name,
        avatar: user.avatarUrl ?? "",
        plan: user.plan,
        referralCode: user.referralCode,
        hasPassword: user.hasPassword,
      },
      credits,
      sessions,
      securityKeys,
    },
    setCookie ? { headers: { "Set-Cookie": setCookie } } : undefined,
  );
}

export async function action({ request }: ActionFunctionArgs) {
  guardAction(request);
  const { user, sessionId } = await requirePageSession(request);
  const formData = await request.formData();
  const intent = formData.get("intent");
  if (intent === "profile") {
    const submission = parseWithZod(formData, { schema: settingsSchema });
    if (submission.status !== "success") {
      return data({ intent, result: submission.reply(), done: false }, { status: 400 });
    }
    const avatar = submission.value.avatar === undefined ? null : submission.value.avatar || null;
    await updateProfile(user.id, { name: submission.value.name, avatar });
    return { intent, result: submission.reply(), done: true };
  }
  if (intent === "password") {
    const submission = parseWithZod(formData, { schema: changePasswordSchema });
    if (submission.status !== "success") {
      return data({ intent, result: submission.reply(), done: false }, { status: 400 });
    }
    try {
      await changePassword(
        user.id,
        submission.value.currentPassword,
        submission.value.newPassword,
        sessionId,
      );
    } catch (error) {
      const status = error instanceof DomainError ? error.status : 500;
      const result = replyWithError(submission, error, ["currentPassword", "newPassword"]);
      return data({ intent, result, done: false }, { status });
    }
    return { intent, result: submission.reply({ resetForm: true }), done: true };
  }
  if (intent === "revoke-session") {
    const id = String(formData.get("sessionId") ?? "");
    await revokeSession(user.id, id);
    return { intent, result: undefined, done: true };
  }
  if (intent === "remove-key") {
    const id = String(formData.get("keyId") ?? "");
    try {
      await removeWebauthnCredential(user.id, id);
    } catch (error) {
      if (!(error instanceof DomainError)) throw error;
      return data({ intent, result: undefined, done: false }, { status: error.status });
    }
    return { intent, result: undefined, done: true };
  }
  throw new Response("Unknown action", { status: 400 });
}

export default function Settings() {
  const { user, credits, sessions, securityKeys } = useLoaderData<typeof loader>();
  const actionData = useActionData<typeof action>();
  const resultFor = (intent: string) =>
    actionData?.intent === intent ? (actionData.result ?? undefined) : undefined;

  const [profileForm, profile] = useForm<z.input<typeof settingsSchema>>({
    id: "profile",
    lastResult: resultFor("profile"),
    constraint: getZodConstraint(settingsSchema),
    defaultValue: { name: user.name, avatar: user.avatar },
    shouldValidate: "onBlur",
    onValidate: ({ formData }) => parseWithZod(formData, { schema: settingsSchema }),
  });
  const [passwordForm, password] = useForm<z.input<typeof changePasswordSchema>>({
    id: "password",
    lastResult: resultFor("password"),
    constraint: getZodConstraint(changePasswordSchema),
    shouldValidate: "onBlur",
    onValidate: ({ formData }) => parseWithZod(formData, { schema: changePasswordSchema }),
  });

  return (
    <div className="space-y-6">
      <h1 className="text-2xl font-semibold">Settings</h1>
      <p className="text-sm text-slate-600">
        Signed in as <strong>{user.email}</strong> · plan <strong>{user.plan}</strong> · {credits}{" "}
        credits · your referral code <code>{user.referralCode}</code>
      </p>

      <Card title="Profile">
        {actionData?.intent === "profile" && actionData.done ? (
          <Notice>Profile saved.</Notice>
        ) : null}
        <Form method="post" {...getFormProps(profileForm)} className="space-y-4">
          <input type="hidden" name="intent" value="profile" />
          <Errors id={profileForm.errorId} errors={profileForm.errors} />
          <Field label="Name" field={profile.name} autoComplete="name" />
          <Field
            label="Avatar URL"
            field={profile.avatar}
            type="url"
            hint="An https:// image address; leave empty for none."
          />
          <Submit>Save profile</Submit>
        </Form>
      </Card>

      <Card title="Password">
        {actionData?.intent === "password" && actionData.done ? (
          <Notice>Password changed. Your other browsers were signed out.</Notice>
        ) : null}
        {!user.hasPassword ? (
          <p className="text-sm text-slate-600">
            You sign in with a provider and have no password yet; use “Forgot your password?” on the
            sign-in page to set one.
          </p>
        ) : null}
        <Form method="post" {...getFormProps(passwordForm)} className="space-y-4">
          <input type="hidden" name="intent" value="password" />
          <Errors id={passwordForm.errorId} errors={passwordForm.errors} />
          <Field
            label="Current password"
            field={password.currentPassword}
            type="password"
            autoComplete="current-password"
          />
          <Field
            label="New password"
            field={password.newPassword}
            type="password"
            autoComplete="new-password"
            hint="At least 8 characters. Other signed-in browsers will be signed out."
          />
          <Submit>Change password</Submit>
        </Form>
      </Card>

      <Card title="Security keys">
        <SecurityKeys keys={securityKeys} />
      </Card>

      <Card title="Audit log">
        <p className="text-sm">
          <a className="underline" href="/settings/audit">
            See and export the record of sign-ins, keys, plan changes and agent actions
          </a>
        </p>
      </Card>
      <Card title="Sessions">
        <ul className="divide-y divide-slate-100">
          {sessions.map((s) => (
            <li key={s.id} className="flex items-center justify-between gap-4 py-3 text-sm">
              <div>
                <div className="font-medium">
                  {s.userAgent ?? "Unknown browser"} {s.current ? "(this browser)" : ""}
                </div>
                <div className="text-slate-500">
                  {s.ip ?? "unknown address"} · last active {new Date(s.lastSeenAt).toUTCString()}
                </div>
              </div>
              {s.current ? null : (
                <Form method="post">
                  <input type="hidden" name="intent" value="revoke-session" />
                  <input type="hidden" name="sessionId" value={s.id} />
                  <button type="submit" className="text-sm text-red-700 underline">
                    Sign out
                  </button>
                </Form>
              )}
            </li>
          ))}
        </ul>
      </Card>
    </div>
  );
}
