import { Form } from "@remix-run/react";
import { Card } from "./forms.tsx";

// The agent page's marketplace skills: installed versions with update and remove (plain forms,
// intents `skill-update` / `skill-remove` of the chat page's action).

export interface InstalledSkill {
  name: string;
  version: string;
  enabled: boolean;
  updateAvailable: string | null;
}

export function InstalledSkills({ installed }: { installed: InstalledSkill[] }) {
  return (
    <Card title="Marketplace skills">
      {installed.length === 0 ? (
        <p className="text-sm">
          None installed yet. <a href="/skills">Browse the skills marketplace</a>.
        </p>
      ) : (
        <ul className="space-y-1 text-sm" data-testid="installed-skills">
          {installed.map((s) => (
            <li key={s.name} className="flex flex-wrap items-center justify-between gap-2">
              <span>
                <a href={`/skills/${s.name}`}>{s.name}</a> {s.version}
                {s.updateAvailable ? ` (${s.updateAvailable} available)` : ""}
              </span>
              <span className="flex gap-2">
                {s.updateAvailable ? (
                  <Form method="post">
                    <input type="hidden" name="intent" value="skill-update" />
                    <input type="hidden" name="name" value={s.name} />
                    <button type="submit" className="rounded border px-2 text-xs">
                      Update
                    </button>
                  </Form>
                ) : null}
                <Form method="post">
                  <input type="hidden" name="intent" value="skill-remove" />
                  <input type="hidden" name="name" value={s.name} />
                  <button
                    type="submit"
                    aria-label={`Remove ${s.name}`}
                    className="rounded border px-2 text-xs"
                  >
                    Remove
                  </button>
                </Form>
              </span>
            </li>
          ))}
        </ul>
      )}
    </Card>
  );
}
