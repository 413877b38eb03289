import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import {
  ensureInstanceRecord,
  type InstanceRow,
  updateInstance,
} from "../../app/server/agents/instances.server.ts";
import { requestWake } from "../../app/server/agents/wake.server.ts";
import { wakeQueuePlace } from "../../app/server/agents/wake-queue.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { stopBoss } from "../../app/server/platform/jobs.server.ts";
import { parseMeminfo } from "../../worker/instances/host-memory.ts";
import { isTight, roomBytes, setHostMemorySource } from "../../worker/instances/memory-pressure.ts";
import { dueForSleep } from "../../worker/instances/sleep.ts";
import { NoRoomToWakeError, withWakeSlot } from "../../worker/instances/wake-slots.ts";
import { waitFor } from "../helpers/wait-for.ts";
import { agentUser, hostWithAvailable as host } from "./support.ts";

// A full host (decision 0222) without a gateway: the host's memory comes from a stand-in
// source, so what is checked is the policy — when memory is tight, which idle agents sleep and
// in which order, and a wake that does not fit waits in line instead of starting.

const MiB = 1024 ** 2;
const GiB = 1024 * MiB;

beforeAll(() => {
  process.env.WAKE_CONCURRENCY = "2";
  delete process.env.SLEEP_IDLE_SECONDS;
  resetEnvCache();
});
afterEach(() => setHostMemorySource(undefined));
afterAll(async () => {
  delete process.env.WAKE_CONCURRENCY;
  delete process.env.WAKE_ROOM_WAIT_MS;
  resetEnvCache();
  await stopBoss({ graceful: false });
});

it("reads /proc/meminfo's figures, and calls memory tight under 15 % available", () => {
  const m = parseMeminfo(
    "MemTotal:       24683792 kB\nMemAvailable:    2000000 kB\nSwapTotal:       2097148 kB\nSwapFree:        1845164 kB\nZswap:             88184 kB\nZswapped:         178916 kB\n",
  );
  expect(m.availableBytes).toBe(2_000_000 * 1024);
  expect(m.zswappedBytes).toBe(178_916 * 1024);
  expect(isTight(m)).toBe(true); // 2 GB of 24.7 GB is 8 %
  expect(isTight(host(8 * GiB))).toBe(false);
  // Room: available + the pool the disk swap can still take, less the 512 MiB reserve.
  expect(roomBytes(host(1 * GiB))).toBe(1 * GiB + 300 * MiB - 512 * MiB);
});

it("while memory is tight, idle agents sleep after SLEEP_TIGHT_IDLE_SECONDS, coldest first", async () => {
  const now = Date.now();
  const rows: Array<InstanceRow & { active_at: Date }> = [];
  // Idle 5 min, 45 min, 3 min and 30 s (solo plan: 30 min).
  for (const idleSeconds of [300, 2_700, 180, 30]) {
    const user = await agentUser("solo");
    const row = await ensureInstanceRecord(user.id, { plan: "solo" });
    rows.push({ ...row, active_at: new Date(now - idleSeconds * 1000) });
  }
  const [fiveMin, fortyFive, threeMin] = rows.map((r) => r.id);
  // Plenty of memory: the plan's period only.
  expect(dueForSleep(rows, now, false).map((r) => r.id)).toEqual([fortyFive]);
  // Tight: everything idle 2 min or more, the coldest first.
  expect(dueForSleep(rows, now, true).map((r) => r.id)).toEqual([fortyFive, fiveMin, threeMin]);
});

it("a wake that does not fit in memory waits at the head of the line until it does", async () => {
  const user = await agentUser("solo");
  const row = await ensureInstanceRecord(user.id);
  // Its gateway held 900 MiB awake (the sample taken as it went to sleep).
  await updateInstance(row.id, { observed_state: "sleeping", memory_bytes: 900 * MiB });
  expect(await requestWake(row.id, "chat")).toBe(true);
  let figures = host(600 * MiB); // 600 + 300 - 512 = 388 MiB of room
  let reads = 0;
  setHostMemorySource({
    read: async () => {
      reads += 1;
      return figures;
    },
  });
  let woke = false;
  const wake = withWakeSlot(row.id, async () => {
    woke = true;
    await updateInstance(row.id, { observed_state: "running" });
  });
  await waitFor(async () => reads >= 3, { what: "the wake looking for room", timeoutMs: 10_000 });
  expect(woke).toBe(false);
  // Still in line, first: the user sees nobody ahead.
  expect(await wakeQueuePlace(row.id)).toMatchObject({ ahead: 0 });
  figures = host(2 * GiB); // an agent went to sleep: 1.8 GiB of room
  await wake;
  expect(woke).toBe(true);
});

it("a wake that finds no room within WAKE_ROOM_WAIT_MS fails instead of pushing a neighbour out", async () => {
  process.env.WAKE_ROOM_WAIT_MS = "200";
  resetEnvCache();
  const user = await agentUser("solo");
  const row = await ensureInstanceRecord(user.id);
  await updateInstance(row.id, { observed_state: "sleeping", memory_bytes: 900 * MiB });
  expect(await requestWake(row.id, "chat")).toBe(true);
  setHostMemorySource({ read: async () => host(100 * MiB) });
  await expect(withWakeSlot(row.id, async () => "woken")).rejects.toBeInstanceOf(NoRoomToWakeError);
  // It keeps its place for the job's retry.
  expect(await wakeQueuePlace(row.id)).toMatchObject({ ahead: 0 });
});
