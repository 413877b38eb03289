import { getFormProps, useForm } from "@conform-to/react";
import { getZodConstraint, parseWithZod } from "@conform-to/zod/v4";
import { data, type LoaderFunctionArgs, type MetaFunction } from "@remix-run/node";
import { Form, useActionData, useLoaderData } from "@remix-run/react";
import { z } from "zod";
import { Card, Errors, Field, Notice, Submit } from "../components/forms.tsx";
import { SecurityKeys } from "../components/security-keys.tsx";
import { changeEmailSchema, changePasswordSchema, settingsSchema } from "../schemas/accounts.ts";
import { creditBalance } from "../server/accounts/credits.server.ts";
import { requestEmailChange } from "../server/accounts/email-change.server.ts";
import { requirePageSession, signedIn } from "../server/accounts/pages.server.ts";
import { listSessions, revokeSession } from "../server/accounts/sessions.server.ts";
import { changePassword, updateProfile } from "../server/accounts/users.server.ts";
import {
  listWebauthnCredentials,
  removeWebauthnCredential,
} from "../server/identity/webauthn.server.ts";
import { formAction } from "../server/platform/form-action.server.ts";

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
      emailChanged: new URL(request.url).searchParams.get("email") === "changed",
    },
    setCookie ? { headers: { "Set-Cookie": setCookie } } : undefined,
  );
}

const schema = z.discriminatedUnion("intent", [
  settingsSchema.extend({ intent: z.literal("profile") }),
  changePasswordSchema.extend({ intent: z.literal("password") }),
  changeEmailSchema.extend({ intent: z.literal("email") }),
  z.object({ intent: z.literal("revoke-session"), sessionId: z.string().max(200) }),
  z.object({ intent: z.literal("remove-key"), keyId: z.string().max(200) }),
]);

export const action = /* @__PURE__ */ formAction({
  schema,
  access: signedIn,
  fields: ["name", "avatar", "currentPassword", "newPassword", "newEmail"],
  resetForm: ["password", "email"],
  handler: async ({ session: { user, sessionId }, value }) => {
    switch (value.intent) {
      case "profile": {
        const avatar = value.avatar === undefined ? null : value.avatar || null;
        await updateProfile(user.id, { name: value.name, avatar });
        break;
      }
      case "password":
        await changePassword(user.id, value.currentPassword, value.newPassword, sessionId);
        break;
      case "email": {
        const { pendingEmail } = await requestEmailChange(
          user.id,
          value.newEmail,
          value.currentPassword,
        );
        return { done: true, pendingEmail };
      }
      case "revoke-session":
        await revokeSession(user.id, value.sessionId);
        break;
      case "remove-key":
        await removeWebauthnCredential(user.id, value.keyId);
        break;
    }
    return { done: true };
  },
});

export default function Settings() {
  const { user, credits, sessions, securityKeys, emailChanged } = useLoaderData<typeof loader>();
  const actionData = useActionData<typeof action>();
  const resultFor = (intent: string) =>
    actionData?.intent === intent ? actionData.result : undefined;

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

  const [emailForm, emailFields] = useForm<z.input<typeof changeEmailSchema>>({
    id: "email",
    lastResult: resultFor("email"),
    constraint: getZodConstraint(changeEmailSchema),
    shouldValidate: "onBlur",
    onValidate: ({ formData }) => parseWithZod(formData, { schema: changeEmailSchema }),
  });
  const pendingEmail =
    actionData?.intent === "email" && actionData.value && "pendingEmail" in actionData.value
      ? actionData.value.pendingEmail
      : undefined;

  return (
    <div className="space-y-6">
      <h1 className="text-2xl font-semibold">Settings</h1>
      <p className="text-sm text-slate-600">
        Signed in as <strong>{user.email}</strong> · plan <strong>{user.plan}</strong> · {credits}{" "}
        credits · your referral code <code>{user.referralCode}</code>
      </p>

      {actionData?.error &&
      (actionData.intent === "revoke-session" || actionData.intent === "remove-key") ? (
        <Notice tone="error">{actionData.error}</Notice>
      ) : null}

      <Card title="Profile">
        {actionData?.intent === "profile" && actionData.value?.done ? (
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

      <Card title="Email">
        {emailChanged ? <Notice>Email changed: you now sign in with {user.email}.</Notice> : null}
        {pendingEmail ? (
          <Notice>
            A confirmation link has been sent to {pendingEmail}. Your email changes when you open
            it.
          </Notice>
        ) : null}
        <Form method="post" {...getFormProps(emailForm)} className="space-y-4">
          <input type="hidden" name="intent" value="email" />
          <Errors id={emailForm.errorId} errors={emailForm.errors} />
          <Field label="New email" field={emailFields.newEmail} type="email" autoComplete="email" />
          {user.hasPassword ? (
            <Field
              label="Current password"
              field={emailFields.currentPassword}
              type="password"
              autoComplete="current-password"
            />
          ) : null}
          <Submit>Change email</Submit>
        </Form>
      </Card>

      <Card title="Password">
        {actionData?.intent === "password" && actionData.value?.done ? (
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
