import { getFormProps, getInputProps, getTextareaProps, useForm } from "@conform-to/react";
import { parseWithZod } from "@conform-to/zod/v4";
import { Form, useNavigation } from "@remix-run/react";
import type { z } from "zod";
import { agentSettingsActions, PERSONA_MAX_CHARS } from "../schemas/agent-settings.ts";
import { CONFIG_MAX_BYTES } from "../schemas/agents.ts";
import type { settingsPage } from "../server/agents/agent-settings.server.ts";
import type { FormReply } from "../server/platform/form-action.server.ts";
import { AgentTabs } from "./agent-tabs.tsx";
import { Card, Errors, Notice, Submit } from "./forms.tsx";
import { price } from "./onboarding.tsx";

// The settings tab (app/routes/agents.$id.settings.tsx): what people change as validated forms
// with help text, and the whole configuration as JSON under "Advanced".

export type SettingsPageData = Awaited<ReturnType<typeof settingsPage>>;
type Reply = FormReply<{ message: string }>;
type Input = z.input<typeof agentSettingsActions>;
type Output = z.output<typeof agentSettingsActions>;

const inputClass =
  "block w-full rounded-md border border-slate-300 px-3 py-2 text-sm shadow-sm focus:border-indigo-500 focus:outline-none focus:ring-1 focus:ring-indigo-500";
const labelClass = "block text-sm font-medium text-slate-700";
const hintClass = "text-xs text-slate-600";

/** One conform form of the tab, showing the reply only when it answers this intent. */
function useSettingsForm(intent: string, reply: Reply | undefined, defaultValue: Partial<Input>) {
  return useForm<Input, Output>({
    id: `settings-${intent}`,
    lastResult: reply?.intent === intent ? reply.result : undefined,
    defaultValue: { ...defaultValue, intent } as Partial<Input>,
    shouldValidate: "onSubmit",
    shouldRevalidate: "onInput",
    onValidate: ({ formData }) => parseWithZod(formData, { schema: agentSettingsActions }),
  });
}

function Answer({ intent, reply }: { intent: string; reply: Reply | undefined }) {
  if (reply?.intent !== intent) return null;
  if (reply.error) return <Notice tone="error">{reply.error}</Notice>;
  return reply.value ? <Notice>{reply.value.message}</Notice> : null;
}

export function AgentSettings({ d, reply }: { d: SettingsPageData; reply: Reply | undefined }) {
  const navigation = useNavigation();
  const busy = (intent: string) => navigation.formData?.get("intent") === intent;
  const [profile, pf] = useSettingsForm("profile", reply, {
    name: d.agent.name,
    model: d.agent.model,
    persona: d.persona,
  });
  const [access, af] = useSettingsForm("access", reply, { telegramOwner: d.telegram.owner });
  const [beat, bf] = useSettingsForm("heartbeat", reply, {
    enabled: d.heartbeat?.enabled ? "on" : undefined,
    every: d.heartbeat?.every === "0m" ? "30m" : (d.heartbeat?.every ?? "30m"),
  });
  const [json, jf] = useSettingsForm("config", reply, {
    config: JSON.stringify(d.config, null, 2),
  });
  // Fields of the discriminated union, each from its own form (conform's fieldsets are proxies:
  // read by name, never spread).
  type Fields = Record<string, NonNullable<(typeof pf)[keyof typeof pf]>>;
  const owner: Record<string, Fields> = {
    name: pf as Fields,
    model: pf as Fields,
    persona: pf as Fields,
    telegramOwner: af as Fields,
    every: bf as Fields,
    config: jf as Fields,
  };
  const field = (name: string) => owner[name]![name]!;
  return (
    <div className="space-y-6">
      <h1 className="text-2xl font-semibold">Settings of {d.agent.name}</h1>
      <AgentTabs agentId={d.agent.id} />

      <Card title="Name, model and persona">
        <Form method="post" {...getFormProps(profile)} className="space-y-4">
          <input type="hidden" name="intent" value="profile" />
          <Answer intent="profile" reply={reply} />
          <Errors id={profile.errorId} errors={profile.errors} />
          <div className="space-y-1">
            <label htmlFor={field("name").id} className={labelClass}>
              Name
            </label>
            <input {...getInputProps(field("name"), { type: "text" })} className={inputClass} />
            <p className={hintClass}>What the agent calls itself and how it is listed.</p>
            <Errors id={field("name").errorId} errors={field("name").errors} />
          </div>
          <div className="space-y-1">
            <label htmlFor={field("model").id} className={labelClass}>
              Model
            </label>
            <select
              id={field("model").id}
              name="model"
              defaultValue={d.agent.model}
              aria-describedby={`${field("model").id}-hint`}
              className={inputClass}
            >
              {d.models.map((m) => (
                <option key={m.id} value={m.id}>
                  {m.name} — {price(m)}
                </option>
              ))}
            </select>
            <p id={`${field("model").id}-hint`} className={hintClass}>
              Each reply is billed by the tokens it reads and writes at this model's price.
            </p>
            <Errors id={field("model").errorId} errors={field("model").errors} />
          </div>
          <div className="space-y-1">
            <label htmlFor={field("persona").id} className={labelClass}>
              Persona
            </label>
            <textarea {...getTextareaProps(field("persona"))} rows={4} className={inputClass} />
            <p className={hintClass}>
              How it should come across, in a sentence or two (“patient tutor, short answers”). At
              most {PERSONA_MAX_CHARS} characters; empty for the default.
            </p>
            <Errors id={field("persona").errorId} errors={field("persona").errors} />
          </div>
          <Submit busy={busy("profile")}>Save</Submit>
        </Form>
      </Card>

      <Card title="Who may talk to it">
        {d.telegram.connected ? (
          <Form method="post" {...getFormProps(access)} className="space-y-4">
            <input type="hidden" name="intent" value="access" />
            <Answer intent="access" reply={reply} />
            <Errors id={access.errorId} errors={access.errors} />
            <div className="space-y-1">
              <label htmlFor={field("telegramOwner").id} className={labelClass}>
                Your Telegram user id
              </label>
              <input
                {...getInputProps(field("telegramOwner"), { type: "text" })}
                inputMode="numeric"
                className={inputClass}
              />
              <p className={hintClass}>
                With your id set, only you can talk to the bot on Telegram. Empty: anyone who pairs
                with it (the bot asks for a pairing code first).
              </p>
              <Errors id={field("telegramOwner").errorId} errors={field("telegramOwner").errors} />
            </div>
            <Submit busy={busy("access")}>Save</Submit>
          </Form>
        ) : (
          <p className="text-sm text-slate-600">
            No chat app is connected: people talk to the agent here only. Connect Telegram on the
            Channels &amp; keys tab.
          </p>
        )}
      </Card>

      <Card title="Heartbeat">
        {d.heartbeatError ? (
          <Notice tone="error">
            The heartbeat is read from the running gateway: {d.heartbeatError}
          </Notice>
        ) : (
          <Form method="post" {...getFormProps(beat)} className="space-y-4">
            <input type="hidden" name="intent" value="heartbeat" />
            <Answer intent="heartbeat" reply={reply} />
            <Errors id={beat.errorId} errors={beat.errors} />
            <label className="flex items-center gap-2 text-sm">
              <input
                type="checkbox"
                name="enabled"
                value="on"
                defaultChecked={d.heartbeat?.enabled ?? false}
              />
              Check in on its own regularly
            </label>
            <div className="space-y-1">
              <label htmlFor={field("every").id} className={labelClass}>
                How often
              </label>
              <input {...getInputProps(field("every"), { type: "text" })} className={inputClass} />
              <p className={hintClass}>
                Like 30m, 2h or 1h30m (between 5m and 24h). Every check-in is a full reply, billed
                like any other.
              </p>
              <Errors id={field("every").errorId} errors={field("every").errors} />
            </div>
            <Submit busy={busy("heartbeat")}>Save</Submit>
          </Form>
        )}
      </Card>

      <Card title="Advanced: the whole configuration">
        <details open={reply?.intent === "config" && !!reply.error}>
          <summary className="cursor-pointer text-sm text-indigo-700">Edit as JSON</summary>
          <Form method="post" {...getFormProps(json)} className="mt-3 space-y-3">
            <input type="hidden" name="intent" value="config" />
            <Answer intent="config" reply={reply} />
            <Errors id={json.errorId} errors={json.errors} />
            <label htmlFor={field("config").id} className={labelClass}>
              Configuration (a JSON object, at most {CONFIG_MAX_BYTES / 1024} KiB)
            </label>
            <textarea
              {...getTextareaProps(field("config"))}
              rows={12}
              spellCheck={false}
              className={`${inputClass} font-mono text-xs`}
            />
            <Errors id={field("config").errorId} errors={field("config").errors} />
            <p className={hintClass}>
              {d.agent.configApplied
                ? "The gateway runs this configuration."
                : d.agent.applyError
                  ? `Not applied: ${d.agent.applyError}`
                  : "Saved; the gateway picks it up when it is running."}
            </p>
            <Submit busy={busy("config")}>Save configuration</Submit>
          </Form>
        </details>
      </Card>
    </div>
  );
}
