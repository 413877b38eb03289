import { afterEach, expect, it } from "vitest";
import {
  ensureInstanceRecord,
  getInstance,
  updateInstance,
} from "../../app/server/agents/instances.server.ts";
import { markAsleep } from "../../app/server/agents/sleep.server.ts";
import { observe } from "../../worker/instances/observe.ts";
import { type AgentRuntime, type ContainerInfo, setRuntime } from "../../worker/runtime/index.ts";
import { ensureUser } from "../helpers/users.ts";

// The stack test's chat after a drain met 502 "gateway unavailable" in some runs: the worker's
// sampler observes every instance every few seconds without the instance's lock, and an
// observation that read the gateway stopped for its move (no address) was written after the
// move had recorded the new task's address, so the row said "stopped" with no address until the
// next pass. An observation older than what the row holds now is dropped.

afterEach(() => setRuntime(undefined));

/** A container as the Swarm driver reports one whose task is stopped (a move's copy). */
const stoppedForMove = (name: string): ContainerInfo => ({
  id: "svc_moving",
  name,
  image: "agent-gateway:test",
  imageId: "sha256:test",
  state: "restarting",
  running: false,
  health: undefined,
  oomKilled: false,
  exitCode: 0,
  restartCount: 1,
  startedAt: undefined,
  finishedAt: undefined,
  labels: {},
  address: undefined,
  ports: {},
  hostname: name,
  limits: { memoryBytes: 0, cpuShares: 0, nanoCpus: 0, pidsLimit: 0 },
  security: { init: true, capDrop: ["ALL"], securityOpt: [], readOnly: false },
  restartPolicy: "on-failure",
  env: [],
  mounts: [],
});

it("an observation begun before the row was updated does not overwrite it", async () => {
  const userId = "usr_observe_race";
  await ensureUser(userId);
  const row = await ensureInstanceRecord(userId);
  await updateInstance(row.id, {
    container_id: "svc_moving",
    observed_state: "running",
    gateway_address: "10.213.0.4:18789",
    observed_at: new Date(Date.now() - 60_000),
  });
  // The sampler's inspect answers "stopped for the move" only once the move has finished.
  let answer: (info: ContainerInfo) => void = () => {};
  let asked: () => void = () => {};
  const inspecting = new Promise<void>((resolve) => {
    asked = resolve;
  });
  setRuntime({
    driver: "swarm",
    inspect: () => {
      asked();
      return new Promise<ContainerInfo>((resolve) => {
        answer = resolve;
      });
    },
  } as unknown as AgentRuntime);
  const sampled = observe((await getInstance(row.id)) ?? row);
  await inspecting;
  // The move ends meanwhile (drain.ts's observeMoved, an adoption, an action): the new task.
  await updateInstance(row.id, {
    observed_state: "running",
    health: "healthy",
    gateway_address: "10.213.0.5:18789",
    observed_at: new Date(Date.now() + 1), // later than the read began, even in the same ms
  });
  answer(stoppedForMove(row.container_name));
  const seen = await sampled;
  expect(seen).toMatchObject({ observed_state: "running", gateway_address: "10.213.0.5:18789" });
  expect(await getInstance(row.id)).toMatchObject({
    observed_state: "running",
    gateway_address: "10.213.0.5:18789",
  });

  // A later observation is written as always.
  setRuntime({
    driver: "swarm",
    inspect: async () => stoppedForMove(row.container_name),
  } as unknown as AgentRuntime);
  expect(await observe((await getInstance(row.id)) ?? row)).toMatchObject({
    observed_state: "stopped",
    gateway_address: null,
  });
});

it("an instance put to sleep after the sampler listed it is not observed as a crash", async () => {
  const userId = "usr_observe_sleep_race";
  await ensureUser(userId);
  const row = await ensureInstanceRecord(userId);
  await updateInstance(row.id, {
    container_id: "ctr_sleeper",
    observed_state: "running",
    health: "healthy",
    gateway_address: "10.213.0.7:18789",
    observed_at: new Date(Date.now() - 60_000),
  });
  // The sampler's pass lists the instance while it runs…
  const listed = (await getInstance(row.id)) ?? row;
  // …then the sleep pass marks it asleep and stops its gateway (SIGKILL after the stop's
  // timeout on a loaded host: exit 137) before the pass reaches it.
  expect(await markAsleep(row.id, new Date())).toBe(true);
  setRuntime({
    driver: "docker",
    inspect: async () => ({
      ...stoppedForMove(row.container_name),
      id: "ctr_sleeper",
      state: "exited",
      exitCode: 137,
      finishedAt: new Date().toISOString(),
    }),
  } as unknown as AgentRuntime);
  expect(await observe(listed)).toMatchObject({ observed_state: "sleeping" });
  expect(await getInstance(row.id)).toMatchObject({
    observed_state: "sleeping",
    last_error: null,
  });
});

it("a sleeper whose gateway is still being stopped stays asleep", async () => {
  const userId = "usr_observe_sleep_stopping";
  await ensureUser(userId);
  const row = await ensureInstanceRecord(userId);
  await updateInstance(row.id, {
    container_id: "ctr_stopping",
    observed_state: "running",
    observed_at: new Date(Date.now() - 60_000),
  });
  expect(await markAsleep(row.id, new Date())).toBe(true);
  // `docker stop` under way: the container still runs, its gateway no longer answers.
  setRuntime({
    driver: "docker",
    inspect: async () => ({
      ...stoppedForMove(row.container_name),
      id: "ctr_stopping",
      state: "running",
      running: true,
    }),
  } as unknown as AgentRuntime);
  expect(await observe((await getInstance(row.id)) ?? row)).toMatchObject({
    observed_state: "sleeping",
  });
});
