import type Docker from "dockerode";
import { expect, it } from "vitest";
import { runOnce } from "../../worker/runtime/docker-exec.ts";

// A one-shot container (an update's state copy, a volume probe) whose exit the engine's wait
// never reported: twice in full CI runs the rollback's copy exited in 4 s and its runOnce sat
// out the test's 240 s bound. The exit is also read by inspect, so a lost wait answer costs a
// second, not the one-shot's whole timeout. The engine here is a stand-in at dockerode's
// boundary: a lost wait answer cannot be provoked on a real engine on demand.

it("returns the exit that inspect shows when the engine's wait never answers", async () => {
  let removed = false;
  let inspections = 0;
  const container = {
    start: async () => {},
    wait: () => new Promise<never>(() => {}), // the answer that never comes
    inspect: async () => {
      inspections += 1;
      return { State: { Running: false, Status: "exited", ExitCode: 3 } };
    },
    // Docker's multiplexed log: one stdout frame.
    logs: async () => Buffer.concat([Buffer.from([1, 0, 0, 0, 0, 0, 0, 3]), Buffer.from("ok\n")]),
    remove: async () => {
      removed = true;
    },
  };
  const docker = { createContainer: async () => container } as unknown as Docker;
  const result = await runOnce(docker, {
    image: "agent-platform-test:none",
    volume: "v",
    volumeTarget: "/state",
    cmd: ["true"],
    timeoutMs: 30_000,
  });
  expect(result).toEqual({ exitCode: 3, stdout: "ok\n", stderr: "" });
  expect(inspections).toBe(1);
  expect(removed).toBe(true);
});
