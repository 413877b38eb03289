import { getFormProps, getInputProps, useForm } from "@conform-to/react";
import { Form, Link, useNavigation } from "@remix-run/react";
import type { FormReply } from "../server/platform/form-action.server.ts";
import { Card, Errors, Notice, Submit } from "./forms.tsx";

// The onboarding page body (app/routes/welcome.tsx): one step at a time, each a plain form.

interface ModelOffer {
  id: string;
  name: string;
  description: string;
  featured: boolean;
  perMillion: { prompt: number; completion: number } | null;
}

export interface OnboardingData {
  subscribed: boolean;
  selfHosted: boolean;
  models: ModelOffer[];
  step: "name" | "model" | "channel";
  name: string;
  model: string | null;
  nameError: string | null;
  modelError: string | null;
}

type Reply = FormReply<{ botName: string }>;

interface ChannelFields {
  intent: string;
  name: string;
  model: string;
  channel: "none" | "telegram" | "discord";
  token: string;
}

const STEPS = [
  { id: "name", label: "Name your agent" },
  { id: "model", label: "Pick a model" },
  { id: "channel", label: "Connect a chat app and create" },
] as const;

const inputClass =
  "block w-full rounded-md border border-slate-300 px-3 py-2 text-sm shadow-sm focus:border-indigo-500 focus:outline-none focus:ring-1 focus:ring-indigo-500";

const usd = (n: number) =>
  n === 0 ? "free" : `$${n < 0.01 ? n.toPrecision(2) : n.toFixed(2).replace(/\.00$/, "")}`;

export function price(m: ModelOffer): string {
  if (!m.perMillion) return "Billed as the server's default model";
  return `${usd(m.perMillion.prompt)} in · ${usd(m.perMillion.completion)} out per million tokens`;
}

function Steps({ current }: { current: OnboardingData["step"] }) {
  const at = STEPS.findIndex((s) => s.id === current);
  return (
    <ol className="flex flex-wrap gap-2 text-sm" aria-label="Steps">
      {STEPS.map((s, i) => (
        <li
          key={s.id}
          aria-current={i === at ? "step" : undefined}
          className={
            i === at
              ? "rounded-full bg-indigo-700 px-3 py-1 font-medium text-white"
              : i < at
                ? "rounded-full bg-indigo-50 px-3 py-1 text-indigo-800"
                : "rounded-full bg-slate-100 px-3 py-1 text-slate-700"
          }
        >
          {i + 1}. {s.label}
        </li>
      ))}
    </ol>
  );
}

function NameStep({ d }: { d: OnboardingData }) {
  return (
    <Form method="get" className="space-y-4">
      <div className="space-y-1">
        <label htmlFor="onboarding-name" className="block text-sm font-medium text-slate-700">
          What should your agent be called?
        </label>
        <input
          id="onboarding-name"
          name="name"
          defaultValue={d.name}
          required
          maxLength={100}
          autoComplete="off"
          aria-invalid={d.nameError ? true : undefined}
          aria-describedby={d.nameError ? "onboarding-name-error" : "onboarding-name-hint"}
          className={inputClass}
        />
        <p id="onboarding-name-hint" className="text-xs text-slate-600">
          Up to 100 characters; you can rename it later. For example “Ada” or “Support desk”.
        </p>
        <Errors id="onboarding-name-error" errors={d.nameError ? [d.nameError] : undefined} />
      </div>
      <Submit>Next: pick a model</Submit>
    </Form>
  );
}

function ModelStep({ d }: { d: OnboardingData }) {
  const chosen = d.model ?? d.models[0]?.id;
  return (
    <Form method="get" className="space-y-4">
      <input type="hidden" name="name" value={d.name} />
      <fieldset className="space-y-2" aria-describedby="onboarding-model-hint">
        <legend className="text-sm font-medium text-slate-700">Which model should it use?</legend>
        <p id="onboarding-model-hint" className="text-xs text-slate-600">
          Every message your agent answers is billed by the tokens it reads and writes (a short
          reply is a few hundred tokens). You can change the model later.
        </p>
        <Errors id="onboarding-model-error" errors={d.modelError ? [d.modelError] : undefined} />
        <ul className="space-y-2">
          {d.models.map((m) => (
            <li key={m.id}>
              <label className="flex gap-3 rounded-md border border-slate-200 p-3 hover:bg-slate-50">
                <input
                  type="radio"
                  name="model"
                  value={m.id}
                  defaultChecked={m.id === chosen}
                  className="mt-1"
                />
                <span className="space-y-0.5">
                  <span className="block text-sm font-medium">
                    {m.name}
                    {m.featured ? (
                      <span className="ml-2 rounded bg-indigo-50 px-1.5 py-0.5 text-xs text-indigo-800">
                        recommended
                      </span>
                    ) : null}
                  </span>
                  <span className="block font-mono text-xs text-slate-600">{m.id}</span>
                  <span className="block text-xs text-slate-700" data-testid={`price-${m.id}`}>
                    {price(m)}
                  </span>
                </span>
              </label>
            </li>
          ))}
        </ul>
      </fieldset>
      <div className="flex items-center gap-4">
        <Submit>Next: connect a chat app</Submit>
        <Link to="?" className="text-sm text-indigo-700 underline">
          Back
        </Link>
      </div>
    </Form>
  );
}

function ChannelStep({ d, reply }: { d: OnboardingData; reply: Reply | undefined }) {
  const navigation = useNavigation();
  const [form, fields] = useForm<ChannelFields>({
    id: "onboarding",
    lastResult: reply?.result,
    shouldValidate: "onSubmit",
  });
  const model = d.models.find((m) => m.id === d.model);
  const checked = reply?.intent === "check-token" && reply.value ? reply.value.botName : null;
  const channel = (fields.channel.value as string | undefined) ?? "none";
  return (
    <Form method="post" {...getFormProps(form)} className="space-y-4">
      <input type="hidden" name="name" value={d.name} />
      <input type="hidden" name="model" value={d.model ?? ""} />
      <p className="text-sm text-slate-700">
        <strong>{d.name}</strong> on <strong>{model?.name ?? d.model}</strong> (
        {model ? price(model) : ""}).{" "}
        <Link to={`?name=${encodeURIComponent(d.name)}`} className="text-indigo-700 underline">
          Change
        </Link>
      </p>
      <Errors id={form.errorId} errors={form.errors} />
      <fieldset className="space-y-2">
        <legend className="text-sm font-medium text-slate-700">
          Where should people talk to it? (optional)
        </legend>
        <p className="text-xs text-slate-600">
          You can always chat with your agent here. To reach it from Telegram or Discord too, paste
          the token of a bot you created there (Telegram: @BotFather; Discord: the Developer
          Portal). It is checked now and stored encrypted.
        </p>
        {(
          [
            ["none", "Not now: only chat here"],
            ["telegram", "Telegram"],
            ["discord", "Discord"],
          ] as const
        ).map(([value, label]) => (
          <label key={value} className="flex items-center gap-2 text-sm">
            <input
              type="radio"
              name={fields.channel.name}
              value={value}
              defaultChecked={channel === value}
            />
            {label}
          </label>
        ))}
        <Errors id={fields.channel.errorId} errors={fields.channel.errors} />
      </fieldset>
      <div className="space-y-1">
        <label htmlFor={fields.token.id} className="block text-sm font-medium text-slate-700">
          Bot token
        </label>
        <input
          {...getInputProps(fields.token, { type: "password" })}
          key={fields.token.key}
          autoComplete="off"
          className={inputClass}
        />
        <p className="text-xs text-slate-600">
          Telegram tokens look like <code>123456:ABC-…</code>. Leave empty with “Not now”.
        </p>
        <Errors id={fields.token.errorId} errors={fields.token.errors} />
        {checked ? <Notice>Token works: the bot is {checked}.</Notice> : null}
      </div>
      <div className="flex flex-wrap items-center gap-3">
        <button
          type="submit"
          name="intent"
          value="check-token"
          className="rounded-md border border-slate-400 px-4 py-2 text-sm font-medium text-slate-800 hover:bg-slate-50"
        >
          Check token
        </button>
        <button
          type="submit"
          name="intent"
          value="create"
          disabled={navigation.state === "submitting"}
          className="rounded-md bg-indigo-600 px-4 py-2 text-sm font-medium text-white hover:bg-indigo-700 disabled:opacity-60"
        >
          {navigation.state === "submitting" && navigation.formData?.get("intent") === "create"
            ? "Creating…"
            : "Create my agent"}
        </button>
      </div>
    </Form>
  );
}

export function Onboarding({ d, reply }: { d: OnboardingData; reply: Reply | undefined }) {
  return (
    <div className="mx-auto max-w-2xl space-y-6">
      <h1 className="text-2xl font-semibold">Set up your agent</h1>
      {!d.subscribed ? (
        <Notice tone="error">
          {d.selfHosted ? (
            <>
              Your account has no plan yet, and this server takes no payments: its operator assigns
              plans.{" "}
              <Link to="/billing" className="underline">
                See who to ask
              </Link>
              .
            </>
          ) : (
            <>
              An agent needs a plan.{" "}
              <Link to="/pricing" className="underline">
                Choose a plan
              </Link>
              , then come back here.
            </>
          )}
        </Notice>
      ) : null}
      <Steps current={d.step} />
      <Card title={STEPS.find((s) => s.id === d.step)?.label ?? ""}>
        {d.step === "name" ? (
          <NameStep d={d} />
        ) : d.step === "model" ? (
          <ModelStep d={d} />
        ) : (
          <ChannelStep d={d} reply={reply} />
        )}
      </Card>
      <p className="text-sm text-slate-600">
        Prefer the full form?{" "}
        <Link to="/agents" className="text-indigo-700 underline">
          Go to your agents
        </Link>
        .
      </p>
    </div>
  );
}
