import { afterAll, beforeAll, expect, it } from "vitest";
import { storeChannelCredential } from "../../app/server/agents/channels.server.ts";
import {
  ensureInstanceRecord,
  getInstance,
  type InstanceRow,
  updateInstance,
} from "../../app/server/agents/instances.server.ts";
import {
  markAsleep,
  markWakeRequested,
  recordSleep,
  sleepRecord,
  touchActivity,
  unmarkAsleep,
} from "../../app/server/agents/sleep.server.ts";
import { telegramPendingUpdate } from "../../app/server/channels/telegram.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { hasLiveJob, stopBoss } from "../../app/server/platform/jobs.server.ts";
import { watchSleepers } from "../../worker/instances/sleep-watch.ts";
import { type FakeTelegram, startFakeTelegram } from "./fake-telegram.ts";
import { agentUser } from "./support.ts";

// The channel watcher of sleeping agents (decision 0164) without a gateway: it peeks at the
// bot (the local Bot API stand-in, which confirms updates as Telegram does: only through an
// offset), wakes only for a message newer than what the gateway had seen, and consumes nothing.

let telegram: FakeTelegram;
let instance: InstanceRow;

beforeAll(async () => {
  telegram = await startFakeTelegram();
  process.env.TELEGRAM_API_URL = `http://127.0.0.1:${telegram.port}`;
  resetEnvCache();
  const user = await agentUser("solo");
  instance = await ensureInstanceRecord(user.id);
  await storeChannelCredential(user.id, "chatapp1", { token: telegram.token });
});

afterAll(async () => {
  telegram.close();
  delete process.env.TELEGRAM_API_URL;
  resetEnvCache();
  await stopBoss({ graceful: false });
});

it("peeks without consuming, and wakes a sleeper only for a message it has not seen", async () => {
  telegram.userWrites("read by the gateway before it slept");
  await updateInstance(instance.id, { observed_state: "sleeping" });
  // The gateway had read update 1 (not yet confirmed) when it went to sleep.
  await recordSleep(instance.id, { logLines: [], telegramSeenUpdateId: 1 });
  expect(await watchSleepers()).toEqual([]);

  telegram.userWrites("new while asleep");
  expect(await watchSleepers()).toEqual([instance.id]);
  expect(await hasLiveJob("wake-instance", { instanceId: instance.id })).toBe(true);
  expect((await sleepRecord(instance.id))?.wake_reason).toBe("telegram");
  // Asked once: the next pass leaves a sleeper whose wake is on its way alone.
  expect(await watchSleepers()).toEqual([]);
  // Nothing was confirmed: both updates still wait for the gateway.
  expect(await telegramPendingUpdate(telegram.token)).toBe(2);
  expect(telegram.polls.every((offset) => offset === undefined)).toBe(true);
});

it("a bot whose token Telegram refuses wakes nothing and does not stop the pass", async () => {
  const other = await agentUser("solo");
  const sleeper = await ensureInstanceRecord(other.id);
  await storeChannelCredential(other.id, "chatapp1", { token: "7000001:revoked-token" });
  await updateInstance(sleeper.id, { observed_state: "sleeping" });
  await recordSleep(sleeper.id, { logLines: [], telegramSeenUpdateId: null });
  await expect(telegramPendingUpdate("7000001:revoked-token")).rejects.toThrow(/Unauthorized/);
  expect(await watchSleepers()).toEqual([]);
  expect((await getInstance(sleeper.id))?.observed_state).toBe("sleeping");
});

it("a chat after the idle check keeps the agent awake; one after the mark asks for a wake that the sleep's record keeps", async () => {
  const user = await agentUser("solo");
  const row = await ensureInstanceRecord(user.id);
  await updateInstance(row.id, { observed_state: "running" });
  expect(await markWakeRequested(row.id, "chat")).toBe(false); // awake: nothing to wake
  expect(await sleepRecord(row.id)).toBeUndefined();

  // The sleep pass decided at `checked`; a chat touched the instance after that.
  const checked = new Date(Date.now() - 1_000);
  await touchActivity(user.id);
  expect(await markAsleep(row.id, checked)).toBe(false);
  expect((await getInstance(row.id))?.observed_state).toBe("running");

  // No chat since: marked asleep before its gateway stops. A chat now asks for a wake...
  expect(await markAsleep(row.id, new Date(Date.now() + 1_000))).toBe(true);
  expect((await getInstance(row.id))?.observed_state).toBe("sleeping");
  expect(await markWakeRequested(row.id, "chat")).toBe(true);
  // ...which the record written after the stop keeps, and the watcher leaves alone.
  await recordSleep(row.id, { logLines: ["last line"], telegramSeenUpdateId: null });
  expect(await sleepRecord(row.id)).toMatchObject({
    wake_reason: "chat",
    log_lines: ["last line"],
  });
  expect(await watchSleepers()).not.toContain(row.id);
});

it("a sleep whose gateway could not be stopped is taken back: running, and no wake pending", async () => {
  const user = await agentUser("solo");
  const row = await ensureInstanceRecord(user.id);
  await updateInstance(row.id, { observed_state: "running", health: "healthy" });
  expect(await markAsleep(row.id, new Date(Date.now() + 1_000))).toBe(true);
  expect(await markWakeRequested(row.id, "chat")).toBe(true); // a chat came meanwhile
  await unmarkAsleep(row.id);
  expect(await getInstance(row.id)).toMatchObject({ observed_state: "running", health: "unknown" });
  expect(await sleepRecord(row.id)).toBeUndefined();
  expect(await markWakeRequested(row.id, "chat")).toBe(false); // awake: nothing to wake
  // Only a sleeping instance is taken back (a wake may have run since).
  await updateInstance(row.id, { observed_state: "crashed" });
  await unmarkAsleep(row.id);
  expect((await getInstance(row.id))?.observed_state).toBe("crashed");
});
