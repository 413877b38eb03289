import { mkdtemp, rm } from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, expect, it, vi } from "vitest";
import { call, ENGINE_CALL_BOUND_MS, engineClient } from "../../worker/runtime/docker-engine.ts";
import { call as managerCall } from "../../worker/runtime/swarm-services.ts";
import { RuntimeUnavailableError } from "../../worker/runtime/types.ts";

// A wedged engine (frozen, or an answer lost on the way) accepts the connection and never
// answers: an engine call fails once its bound has passed instead of holding its caller (and
// the instance lock it holds) for good.

let dir: string;
let server: net.Server;
const held = new Set<net.Socket>();

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "wedged-engine-"));
  server = net.createServer((socket) => {
    held.add(socket); // reads the request, never answers
    socket.on("close", () => held.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(path.join(dir, "docker.sock"), resolve));
});

afterEach(() => {
  vi.useRealTimers();
});

afterAll(async () => {
  for (const socket of held) socket.destroy();
  await new Promise((resolve) => server.close(resolve));
  await rm(dir, { recursive: true, force: true });
});

it("fails an engine call that goes unanswered past its bound, as the engine unavailable", async () => {
  const docker = engineClient({ socketPath: path.join(dir, "docker.sock") });
  const started = Date.now();
  const error = await call(() => docker.getContainer("agent-x").inspect(), 300).catch((e) => e);
  expect(error).toBeInstanceOf(RuntimeUnavailableError);
  expect(error.message).toBe("Docker engine did not answer within 300 ms");
  expect(Date.now() - started).toBeLessThan(5_000);
  expect(held.size).toBe(1); // the request did reach the engine
});

it("bounds the Swarm driver's manager calls the same way", async () => {
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
  const docker = engineClient({ socketPath: path.join(dir, "docker.sock") });
  const before = held.size;
  const failed = managerCall(() => docker.listNodes()).catch((e: unknown) => e);
  await vi.waitFor(() => expect(held.size).toBeGreaterThan(before)); // it reached the manager
  await vi.advanceTimersByTimeAsync(ENGINE_CALL_BOUND_MS);
  const error = await failed;
  expect(error).toBeInstanceOf(RuntimeUnavailableError);
  expect((error as Error).message).toBe(
    `Swarm manager did not answer within ${ENGINE_CALL_BOUND_MS} ms`,
  );
});
