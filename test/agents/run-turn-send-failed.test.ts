import { afterEach, describe, expect, it, vi } from "vitest";
import { CHAT_TIMEOUT_MS, runTurn } from "../../app/server/agents/talk.server.ts";
import { GatewayClient } from "../../app/server/openclaw/client.server.ts";

// A chat turn whose `chat.send` fails (the gateway's socket closed, a frozen gateway's request
// timed out) must leave nothing behind: the soak (issue 52) saw web and worker exit with an
// unhandled GatewayUnavailableError "chat: no reply within 120000 ms" two minutes after such a
// turn, because the reply's timer still ran and rejected a promise nobody awaited.

afterEach(() => {
  vi.useRealTimers();
});

describe("a chat turn whose send failed", () => {
  it("rejects with the send's error and rejects nothing else when the reply's timeout passes", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    const unhandled: unknown[] = [];
    const seen = (reason: unknown) => unhandled.push(reason);
    process.on("unhandledRejection", seen);
    try {
      const client = new GatewayClient({ url: "ws://send-failed.test:18789", token: "t" });
      vi.spyOn(client, "request").mockRejectedValue(new Error("socket closed"));
      await expect(runTurn(client, "agent:main:main", "hello")).rejects.toThrow("socket closed");
      await vi.advanceTimersByTimeAsync(CHAT_TIMEOUT_MS + 1);
      // Node reports an unhandled rejection once the microtasks after it have run.
      await new Promise((r) => setImmediate(r));
      await new Promise((r) => setImmediate(r));
      expect(unhandled).toEqual([]);
      expect(vi.getTimerCount()).toBe(0);
    } finally {
      process.off("unhandledRejection", seen);
    }
  });
});
