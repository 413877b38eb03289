import { describe, expect, it } from "vitest";
import { connectionSlots } from "../../app/server/platform/connection-slots.server.ts";

// The per-key connection counter behind the live-socket, event-stream and ingress caps
// (decision 0220).

describe("connection slots", () => {
  it("takes a slot under every claim or none, and releases once", () => {
    const slots = connectionSlots();
    const a = { key: "agent:1", cap: 1 };
    const u = { key: "user:1", cap: 2 };
    const first = slots.take(a, u);
    expect(first).toBeDefined();
    // The agent is full: nothing is taken under the user either.
    expect(slots.take(a, u)).toBeUndefined();
    expect(slots.count("user:1")).toBe(1);
    const other = slots.take({ key: "agent:2", cap: 1 }, u);
    expect(other).toBeDefined();
    expect(slots.take({ key: "agent:3", cap: 1 }, u)).toBeUndefined();
    expect(slots.total()).toBe(2);

    first?.();
    first?.();
    expect(slots.total()).toBe(1);
    expect(slots.byKey()).toEqual(
      new Map([
        ["agent:2", 1],
        ["user:1", 1],
      ]),
    );
    other?.();
    expect(slots.byKey().size).toBe(0);
  });
});
