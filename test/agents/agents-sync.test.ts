import { describe, expect, it } from "vitest";
import type { AgentRow } from "../../app/server/agents/agents.server.ts";
import { messagesOfHistory, textOf } from "../../app/server/agents/history.server.ts";
import { agentsPatch } from "../../worker/instances/agents-patch.ts";

// The pure parts of the worker's agents sync and chat recorder (the real gateway runs them in
// agents-gateway.test.ts).

const agent = (over: Partial<AgentRow>): AgentRow => ({
  id: "agt_x",
  user_id: "usr_1",
  name: "A",
  gateway_agent_id: "main",
  model: "openai/gpt-4o",
  tier: "pro",
  config: {},
  config_revision: 1,
  applied_revision: 0,
  applied_at: null,
  apply_error: null,
  created_at: new Date(),
  updated_at: new Date(),
  ...over,
});

describe("agentsPatch", () => {
  it("writes every agent, allow-listed keys only, and the models they need", () => {
    const patch = agentsPatch(
      [
        agent({
          config: {
            identity: { name: "Sam" },
            tools: { elevated: { enabled: true } },
            workspace: "/",
          },
        }),
        agent({
          id: "agt_y",
          gateway_agent_id: "agt-y",
          name: "B",
          model: "custom",
          config: { skills: [] },
        }),
      ],
      { model: "openai/gpt-4o-mini" },
      {
        agents: { entries: { main: { name: "old" }, "agt-gone": { name: "deleted" }, mine: {} } },
        models: { providers: { platform: { models: [{ id: "openai/gpt-4o-mini" }] } } },
      },
    );
    expect(patch).toEqual({
      agents: {
        ownership: "explicit",
        entries: {
          main: {
            name: "A",
            model: "platform/openai/gpt-4o",
            identity: { name: "Sam" },
            // Every model call of the agent names it (decision 0225).
            params: { extra_body: { platform_agent: "agt_x" } },
          },
          "agt-y": { name: "B", skills: [], params: { extra_body: { platform_agent: "agt_y" } } },
          // A platform entry whose agent is gone is removed; foreign entries are kept.
          "agt-gone": null,
        },
      },
      models: {
        providers: {
          platform: {
            models: [
              { id: "openai/gpt-4o-mini", name: "openai/gpt-4o-mini" },
              { id: "openai/gpt-4o", name: "openai/gpt-4o" },
            ],
          },
        },
      },
    });
  });

  it("is the same patch when applied again (idempotent) and has no ownership for one agent", () => {
    const rows = [agent({})];
    const first = agentsPatch(rows, { model: null }, undefined);
    const second = agentsPatch(
      rows,
      { model: null },
      {
        agents: { entries: first.agents.entries as Record<string, unknown> },
        models: first.models as never,
      },
    );
    expect(second).toEqual(first);
    expect(first.agents).not.toHaveProperty("ownership");
  });
});

describe("removals", () => {
  it("nulls what the stored configuration no longer has, and leaves the gateway's own keys", () => {
    const patch = agentsPatch(
      [agent({ model: "custom", config: { identity: { name: "Sam" } } })],
      { model: "openai/gpt-4o" },
      {
        agents: {
          entries: {
            main: {
              name: "A",
              model: "platform/openai/gpt-4o",
              identity: { name: "Old", emoji: "x" },
              thinkingDefault: "low",
              workspace: "/home/node/.openclaw/workspace",
            },
          },
        },
      },
    );
    expect(patch.agents.entries.main).toEqual({
      name: "A",
      model: null,
      identity: { name: "Sam", emoji: null },
      thinkingDefault: null,
      params: { extra_body: { platform_agent: "agt_x" } },
    });
  });
});

describe("messagesOfHistory", () => {
  it("keeps user and assistant text with stable dedupe keys", () => {
    const history = [
      { role: "user", content: [{ type: "text", text: "Hi" }], timestamp: 1_700_000_000_000 },
      { role: "assistant", content: "Hello!", timestamp: 1_700_000_001_000, id: "m2" },
      { role: "toolResult", content: "x", timestamp: 1_700_000_002_000 },
      { role: "assistant", content: [{ type: "thinking", thinking: "…" }], timestamp: 1 },
    ];
    const out = messagesOfHistory("agent:main:main", history);
    expect(out).toEqual([
      {
        sender: "user",
        content: "Hi",
        timestamp: new Date(1_700_000_000_000),
        dedupeKey: expect.stringMatching(/^agent:main:main\|t:1700000000000:user:[0-9a-f]{16}$/),
      },
      {
        sender: "agent",
        content: "Hello!",
        timestamp: new Date(1_700_000_001_000),
        dedupeKey: "agent:main:main|id:m2",
      },
    ]);
    expect(messagesOfHistory("agent:main:main", history)).toEqual(out);
    expect(textOf({ content: ["a", { text: "b" }] })).toBe("a\nb");
  });
});
