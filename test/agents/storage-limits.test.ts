import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { storageMessage } from "../../app/components/agent-storage.tsx";
import { ensureInstanceRecord, getInstance } from "../../app/server/agents/instances.server.ts";
import { storageView } from "../../app/server/agents/storage.server.ts";
import {
  GIB,
  setStorageOverride,
  storageEntitlement,
} from "../../app/server/billing/storage-limit.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { decideLimit, sampleStorage, warningLevel } from "../../worker/instances/storage-limits.ts";
import { type AgentRuntime, setRuntime } from "../../worker/runtime/index.ts";
import { ensureUser } from "../helpers/users.ts";

// The storage pass's rules (decisions 0216, 0217) against a runtime whose volumes are a map:
// the limit owed (base, upgrades, an operator's override), raised at once, lowered after a
// grace when the data is above, warnings once per crossing of 80 % and 95 %.

const MiB = 1024 ** 2;
const now = new Date("2026-12-05T12:00:00Z");
const day = 86_400_000;

describe("decideLimit", () => {
  const base = { usedBytes: 100, graceUntil: null, now, graceMs: 14 * day };
  it("applies a first limit and raises at once", () => {
    expect(decideLimit({ ...base, applied: undefined, wanted: 500 }).apply).toBe(500);
    expect(decideLimit({ ...base, applied: 200, wanted: 500 }).apply).toBe(500);
    expect(decideLimit({ ...base, applied: 500, wanted: 500 }).apply).toBeUndefined();
  });
  it("lowers at once when the data fits", () => {
    expect(decideLimit({ ...base, applied: 500, wanted: 200 })).toMatchObject({
      apply: 200,
      graceUntil: null,
    });
  });
  it("keeps the higher limit for the grace when the data is above, then lowers", () => {
    const started = decideLimit({ ...base, usedBytes: 300, applied: 500, wanted: 200 });
    expect(started).toEqual({
      apply: undefined,
      graceUntil: new Date(now.getTime() + 14 * day),
      graceStarted: true,
    });
    const waiting = decideLimit({
      ...base,
      usedBytes: 300,
      applied: 500,
      wanted: 200,
      graceUntil: started.graceUntil,
    });
    expect(waiting).toMatchObject({ apply: undefined, graceStarted: false });
    const over = decideLimit({
      ...base,
      usedBytes: 300,
      applied: 500,
      wanted: 200,
      graceUntil: new Date(now.getTime() - 1),
    });
    expect(over).toMatchObject({ apply: 200, graceUntil: null });
  });
  it("ends a grace when the limit owed goes back up", () => {
    expect(
      decideLimit({
        ...base,
        applied: 500,
        wanted: 500,
        graceUntil: new Date(now.getTime() + day),
      }),
    ).toMatchObject({ apply: undefined, graceUntil: null });
  });
});

describe("warning levels and the view", () => {
  it("warns at 80 % and 95 %, full from 99 %", () => {
    expect(warningLevel(79, 100)).toBe(0);
    expect(warningLevel(80, 100)).toBe(80);
    expect(warningLevel(95, 100)).toBe(95);
    const row = (used: number, limit: number | null) => ({
      storage_bytes: used,
      storage_limit_bytes: limit,
      storage_measured_at: now,
      storage_grace_until: null,
    });
    expect(storageView(row(99, 100))).toMatchObject({ full: true, warning: 95, percent: 99 });
    expect(storageView(row(50, 100))).toMatchObject({ full: false, warning: null, enforced: true });
    expect(storageView(row(50, null))).toMatchObject({
      limitBytes: null,
      enforced: false,
      full: false,
    });
  });

  it("the page says storage full, or the warning", () => {
    const say = (used: number) =>
      storageMessage(
        storageView({
          storage_bytes: used,
          storage_limit_bytes: 100 * MiB,
          storage_measured_at: now,
          storage_grace_until: null,
        }),
      )?.text ?? "";
    expect(say(100 * MiB)).toMatch(/^Storage full/);
    expect(say(85 * MiB)).toMatch(/^Storage 80 % full \(85 MB of 100 MB\)/);
    expect(say(10 * MiB)).toBe("");
  });
});

describe("the storage pass", () => {
  const USER = "usr_storage_pass";
  const volumes = new Map<string, { usedBytes: number; limitBytes: number | undefined }>();
  const fake = {
    driver: "docker",
    storageUsage: async () => new Map(volumes),
    setStorageLimit: async (volume: string, limitBytes: number) => {
      const v = volumes.get(volume);
      if (!v) return false;
      v.limitBytes = limitBytes;
      return true;
    },
  } as unknown as AgentRuntime;
  let volume: string;
  const mails = async () =>
    (
      await db()<{ subject: string }[]>`select data->>'subject' as subject from pgboss.job
        where name = 'send-email' and data->>'to' = ${`${USER}@example.com`}`
    ).map((m) => m.subject);
  const setUsed = (bytes: number) => {
    volumes.get(volume)!.usedBytes = Math.round(bytes); // the kernel counts whole bytes
  };

  beforeAll(async () => {
    process.env.STORAGE_BASE_GB = "1";
    resetEnvCache();
    setRuntime(fake);
    await ensureUser(USER);
    volume = (await ensureInstanceRecord(USER, { plan: "solo" })).volume_name;
    volumes.set(volume, { usedBytes: 10 * MiB, limitBytes: GIB });
  });
  afterAll(() => {
    setRuntime(undefined);
    delete process.env.STORAGE_BASE_GB;
    resetEnvCache();
  });

  it("records usage and warns once per crossing of 80 % and 95 %", async () => {
    expect(await sampleStorage()).toBe(1);
    const row = (await getInstance((await ensureInstanceRecord(USER)).id))!;
    expect(Number(row.storage_bytes)).toBe(10 * MiB);
    expect(Number(row.storage_limit_bytes)).toBe(GIB);
    expect(await mails()).toEqual([]);

    setUsed(0.85 * GIB);
    await sampleStorage();
    await sampleStorage();
    expect(await mails()).toEqual(["Your agent's storage is 80 % full"]);
    setUsed(0.97 * GIB);
    await sampleStorage();
    await sampleStorage();
    expect((await mails()).filter((s) => s.includes("95 %"))).toHaveLength(1);
    // Below 80 % and back up: a new crossing, a new warning.
    setUsed(0.5 * GIB);
    await sampleStorage();
    setUsed(0.9 * GIB);
    await sampleStorage();
    expect((await mails()).filter((s) => s.includes("80 %"))).toHaveLength(2);
  });

  it("applies an upgrade at once, an operator's override, and lowers with grace", async () => {
    await db()`insert into storage_grants (checkout_session_id, user_id, gigabytes)
      values ('cs_pass', ${USER}, 50)`;
    expect((await storageEntitlement(USER)).limitBytes).toBe(51 * GIB);
    await sampleStorage(USER);
    expect(volumes.get(volume)?.limitBytes).toBe(51 * GIB);

    await setStorageOverride(USER, 3 * GIB);
    await sampleStorage(USER);
    expect(volumes.get(volume)?.limitBytes).toBe(3 * GIB);
    await setStorageOverride(USER, null);

    // The plan subscription ended: the upgrade no longer counts. The data (2 GB) is above the
    // 1 GB base: the limit stays (here 51 GB again) until the grace ends; a notice is sent.
    await sampleStorage(USER);
    setUsed(2 * GIB);
    await db()`insert into subscriptions (id, user_id, stripe_customer_id, kind, item, price_id,
      status) values ('sub_pass', ${USER}, 'cus_pass', 'plan', 'solo', 'price_x', 'canceled')`;
    expect(await storageEntitlement(USER)).toMatchObject({
      limitBytes: GIB,
      upgradesCount: false,
    });
    await sampleStorage(USER);
    expect(volumes.get(volume)?.limitBytes).toBe(51 * GIB);
    const row = (await getInstance((await ensureInstanceRecord(USER)).id))!;
    expect(row.storage_grace_until).toBeInstanceOf(Date);
    expect(await mails()).toContain("Your agent's storage limit is going down");

    await db()`update instances set storage_grace_until = now() - interval '1 second'
      where user_id = ${USER}`;
    await sampleStorage(USER);
    expect(volumes.get(volume)?.limitBytes).toBe(GIB); // data kept; writes refused past it
  });
});
