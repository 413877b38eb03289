import { PassThrough } from "node:stream";
import { afterAll, beforeAll, expect, it } from "vitest";
import { DockerRuntime } from "../../worker/runtime/docker.ts";
import {
  FreezeUnavailableError,
  LABELS,
  limitsForPlan,
  RuntimeUnavailableError,
} from "../../worker/runtime/types.ts";
import {
  buildImage,
  cleanupTestObjects,
  describeDocker,
  freezeExpected,
  GATEWAY_IMAGE,
  removeImages,
  testLabels,
  testRun,
  waitFor,
} from "./docker-support.ts";

// Fast driver tests: the gateway image running busybox `sleep` (no gateway start), so limits,
// labels, lifecycle, stats, logs and exec are checked in seconds.

const rt = new DockerRuntime({ maxCpus: 1 });
const network = `agent-test-${testRun}`;

// Each container's volume is created labelled first (Docker would otherwise create it unlabelled).
async function spec(n: number, extra: Partial<Parameters<DockerRuntime["create"]>[0]> = {}) {
  const instanceId = `ins_${testRun}_${n}`;
  await rt.ensureVolume(`agent-${instanceId}-state`, testLabels());
  return {
    instanceId,
    userId: `usr_${testRun}_${n}`,
    image: GATEWAY_IMAGE,
    hostname: `agent-${instanceId}`.slice(0, 63),
    name: `agent-${instanceId}`,
    volume: `agent-${instanceId}-state`,
    volumeTarget: "/home/node/.openclaw",
    network,
    limits: limitsForPlan("solo"),
    env: { OPENCLAW_GATEWAY_TOKEN: "instance-own-token" },
    cmd: ["sh", "-c", "echo hello-from-container; echo oops >&2; exec sleep 600"],
    labels: testLabels(),
    ...extra,
  };
}

describeDocker("Docker driver", () => {
  beforeAll(async () => {
    await rt.ping();
    await rt.ensureNetwork(network, testLabels());
  });
  afterAll(async () => {
    await cleanupTestObjects(rt);
  });

  it("creates a hardened container: plan limits, labels, Init, no capabilities, no published port", async () => {
    const s = await spec(1, { limits: limitsForPlan("collective") });
    const id = await rt.create(s);
    await rt.start(id);
    const info = await rt.inspect(id);
    expect(info).toBeDefined();
    if (!info) return;
    expect(info.running).toBe(true);
    expect(info.labels[LABELS.instanceId]).toBe(s.instanceId);
    expect(info.labels[LABELS.userId]).toBe(s.userId);
    expect(info.limits.memoryBytes).toBe(4 * 1024 ** 3);
    expect(info.limits.cpuShares).toBe(2048);
    expect(info.limits.nanoCpus).toBe(1e9); // capped at 1 CPU by the driver option
    expect(info.limits.pidsLimit).toBe(1024);
    expect(info.security.init).toBe(true);
    expect(info.security.capDrop).toEqual(["ALL"]);
    expect(info.security.securityOpt).toContain("no-new-privileges");
    expect(info.restartPolicy).toBe("on-failure");
    expect(info.hostname).toBe(s.hostname);
    expect(info.mounts).toContainEqual({
      name: s.volume,
      destination: s.volumeTarget,
      type: "volume",
    });
    expect(Object.values(info.ports).flat()).toEqual([]);
    expect(info.address).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    // Only the instance's own token in its environment, nothing of the platform's.
    const own = info.env.filter(
      (e) =>
        !e.startsWith("PATH=") &&
        !/^(HOME|OPENCLAW_(STATE_DIR|CONFIG_PATH|WORKSPACE_DIR|DISABLE_BONJOUR|NO_RESPAWN|NO_AUTO_UPDATE)|XDG_CACHE_HOME|NODE_OPTIONS|MALLOC_ARENA_MAX)=/.test(
          e,
        ),
    );
    expect(own).toEqual(["OPENCLAW_GATEWAY_TOKEN=instance-own-token"]);
    // Unknown and free plans get the solo size.
    expect(limitsForPlan("free").memoryBytes).toBe(2 * 1024 ** 3);
    expect(limitsForPlan(undefined).memoryBytes).toBe(2 * 1024 ** 3);
    expect(limitsForPlan("network").memoryBytes).toBe(16 * 1024 ** 3);
    await rt.remove(id);
  });

  it("publishes a port only on 127.0.0.1 when asked", async () => {
    const id = await rt.create(await spec(2, { loopbackPort: 18789 }));
    await rt.start(id);
    const info = await waitFor(
      async () => {
        const i = await rt.inspect(id);
        return i && Object.keys(i.ports).length > 0 ? i : undefined;
      },
      { what: "port binding" },
    );
    const bindings = Object.values(info.ports).flat();
    expect(bindings.length).toBeGreaterThan(0);
    for (const b of bindings) expect(b.hostIp).toBe("127.0.0.1");
    await rt.remove(id);
  });

  it("stops, starts, restarts, reports stats, logs and exec, lists by label, removes", async () => {
    const s = await spec(3);
    const id = await rt.create(s);
    await rt.start(id);
    // Both streams (waitFor fails the test if either never shows): stderr's line can reach the
    // log a moment after stdout's (seen once in CI).
    await waitFor(
      async () => {
        const l = await rt.logs(id);
        return l.includes("hello-from-container") && l.includes("oops");
      },
      { what: "stdout and stderr in the logs" },
    );

    const stats = await rt.stats(id);
    expect(stats.memoryBytes).toBeGreaterThan(0);
    expect(stats.memoryLimitBytes).toBe(2 * 1024 ** 3);
    expect(stats.pids).toBeGreaterThan(0);

    // A larger plan's limits, set on the running container (a pooled gateway adopted).
    const running = (await rt.inspect(id))?.startedAt;
    await rt.resize(id, limitsForPlan("collective"));
    const resized = await rt.inspect(id);
    expect(resized?.running).toBe(true);
    expect(resized?.startedAt).toBe(running); // not restarted
    expect(resized?.limits).toEqual({
      memoryBytes: 4 * 1024 ** 3,
      cpuShares: 2048,
      nanoCpus: 1e9, // this driver's cap (maxCpus: 1)
      pidsLimit: 1024,
    });
    expect((await rt.stats(id)).memoryLimitBytes).toBe(4 * 1024 ** 3);

    const ex = await rt.exec(id, ["sh", "-c", "id -u; echo err >&2; exit 3"]);
    expect(ex).toMatchObject({ exitCode: 3, stdout: "1000\n", stderr: "err\n" });

    const listed = await rt.list({ [LABELS.instanceId]: s.instanceId });
    expect(listed.map((c) => c.id)).toEqual([id]);

    await rt.stop(id, 2);
    expect((await rt.inspect(id))?.running).toBe(false);
    await rt.stop(id, 2); // idempotent
    await rt.start(id);
    const before = (await rt.inspect(id))?.startedAt;
    await rt.restart(id, 2);
    const after = await rt.inspect(id);
    expect(after?.running).toBe(true);
    expect(after?.startedAt).not.toBe(before);

    await rt.remove(id);
    expect(await rt.inspect(id)).toBeUndefined();
    await rt.remove(id); // idempotent
    expect(await rt.list({ [LABELS.instanceId]: s.instanceId })).toEqual([]);
  });

  it("freezes a container into swap (where the host has swap); start thaws it with its limit", async () => {
    const MiB = 1024 ** 2;
    const s = await spec(5, {
      limits: { ...limitsForPlan("solo"), memoryBytes: 256 * MiB },
      cmd: [
        "node",
        "-e",
        "globalThis.a = Buffer.alloc(96 << 20, 1); console.log('filled'); setInterval(() => console.log('tick'), 200)",
      ],
    });
    const id = await rt.create(s);
    await rt.start(id);
    await waitFor(async () => (await rt.logs(id)).includes("filled") || undefined, {
      what: "the memory filled",
    });
    expect((await rt.stats(id)).memoryBytes).toBeGreaterThan(90 * MiB);
    if (!(await freezeExpected(rt))) {
      // No swap: the kernel cannot reclaim to the floor, so the freeze is refused and undone.
      await expect(rt.freeze(id, 16 * MiB)).rejects.toBeInstanceOf(FreezeUnavailableError);
      expect((await rt.inspect(id))?.running).toBe(true);
      expect((await rt.inspect(id))?.limits.memoryBytes).toBe(256 * MiB);
      await rt.remove(id);
      return;
    }
    await rt.freeze(id, 16 * MiB);
    const frozen = await rt.inspect(id);
    expect(frozen).toMatchObject({ state: "paused", running: false });
    // The floor asked for, or up to four times it when the kernel could not reclaim so far.
    const floor = frozen?.limits.memoryBytes ?? 0;
    expect([16 * MiB, 32 * MiB, 64 * MiB]).toContain(floor);
    expect((await rt.stats(id)).memoryBytes).toBeLessThanOrEqual(floor);
    // A freeze of a frozen container is refused, and changes nothing.
    await expect(rt.freeze(id, 16 * MiB)).rejects.toBeInstanceOf(FreezeUnavailableError);
    expect(await rt.inspect(id)).toMatchObject({ state: "paused", limits: { memoryBytes: floor } });
    const ticks = async () => (await rt.logs(id)).match(/tick/g)?.length ?? 0;
    const ticksFrozen = await ticks();

    await rt.start(id); // thaws: the plan's limit back, unpaused, the same process
    const thawed = await rt.inspect(id);
    expect(thawed).toMatchObject({ state: "running", running: true, startedAt: frozen?.startedAt });
    expect(thawed?.limits.memoryBytes).toBe(256 * MiB);
    // The same process runs on: it was never restarted (one "filled") and it ticks again.
    await waitFor(async () => (await ticks()) > ticksFrozen || undefined, {
      what: "the thawed process ticking",
    });
    expect((await rt.logs(id)).match(/filled/g)).toHaveLength(1);

    // A frozen container stops (thawed first, so its SIGTERM is handled) with its limit back.
    await rt.freeze(id, 16 * MiB);
    await rt.stop(id, 2);
    const stopped = await rt.inspect(id);
    expect(stopped).toMatchObject({ state: "exited", running: false });
    expect(stopped?.limits.memoryBytes).toBe(256 * MiB);
    await rt.remove(id);
  });

  it("records an out-of-memory kill as OOMKilled", async () => {
    const s = await spec(4, {
      limits: { ...limitsForPlan("solo"), memoryBytes: 32 * 1024 ** 2 },
      // busybox sh grows a string until the cgroup limit kills it
      cmd: ["sh", "-c", "x=aaaaaaaaaaaaaaaa; while true; do x=$x$x; done"],
      restartPolicy: "no",
    });
    const id = await rt.create(s);
    await rt.start(id);
    // The engine records the exit and the OOM event apart: on a loaded machine the container
    // was seen exited a moment before OOMKilled was set (once in CI). Wait for both.
    let last: Awaited<ReturnType<typeof rt.inspect>>;
    const info = await waitFor(
      async () => {
        last = await rt.inspect(id);
        return last && !last.running && last.oomKilled ? last : undefined;
      },
      { what: "the OOM kill recorded", timeoutMs: 30_000 },
    ).catch((error: Error) => {
      throw new Error(`${error.message}; last seen: ${JSON.stringify(last)}`);
    });
    expect(info).toMatchObject({ running: false, oomKilled: true });
    await rt.remove(id);
  });

  it("runs one-shot containers against a volume and removes volumes", async () => {
    const volume = `agent-${testRun}-oneshot`;
    await rt.ensureVolume(volume, testLabels());
    await rt.ensureVolume(volume, testLabels()); // idempotent
    const w = await rt.runOnce({
      image: GATEWAY_IMAGE,
      volume,
      volumeTarget: "/home/node/.openclaw",
      entrypoint: ["sh", "-c"],
      cmd: ['echo "$V" > /home/node/.openclaw/f && cat /home/node/.openclaw/f'],
      env: { V: "written" },
      labels: testLabels(),
    });
    expect(w).toMatchObject({ exitCode: 0, stdout: "written\n" });
    expect(await rt.volumeExists(volume)).toBe(true);
    await rt.removeVolume(volume);
    expect(await rt.volumeExists(volume)).toBe(false);
  });

  it("waits for a removal another caller started, so the volume it held can be removed next", async () => {
    // As a volume helper's own clean-up races the teardown that removes its holders: the
    // second removal used to return on Docker's 409 "already in progress" while the first was
    // still under way, and the volume's removal then failed "in use" (4 times in 5 here).
    for (let i = 0; i < 3; i++) {
      const volume = `agent-${testRun}-held-${i}`;
      await rt.ensureVolume(volume, testLabels());
      const holder = await rt.docker.createContainer({
        Image: GATEWAY_IMAGE,
        Entrypoint: ["sleep", "3600"],
        Labels: testLabels(),
        HostConfig: { Mounts: [{ Type: "volume", Source: volume, Target: "/x" }] },
      });
      await holder.start();
      const first = rt.remove(holder.id);
      await rt.remove(holder.id);
      expect(await rt.inspect(holder.id)).toBeUndefined();
      await rt.removeVolume(volume);
      expect(await rt.volumeExists(volume)).toBe(false);
      await first;
    }
  });

  it("reads where an image keeps its Control UI, from the image's label", async () => {
    const root = await rt.controlUiRoot(GATEWAY_IMAGE);
    expect(root).toBeTruthy();
    const volume = `agent-${testRun}-ui`;
    await rt.ensureVolume(volume, testLabels());
    const found = await rt.runOnce({
      image: GATEWAY_IMAGE,
      volume,
      volumeTarget: "/home/node/.openclaw",
      entrypoint: ["test", "-f", `${root}/index.html`],
      cmd: [],
      labels: testLabels(),
    });
    expect(found.exitCode).toBe(0);
    await rt.removeVolume(volume);
    // An image without the label names none, and so does an image that is not there.
    const bare = `agent-platform-test-bare-${testRun}:1`;
    buildImage(bare, GATEWAY_IMAGE, [
      'LABEL agent-gateway.control-ui-root=""',
      `LABEL agent-platform.test-build=${testRun}`,
    ]);
    try {
      expect(await rt.controlUiRoot(bare)).toBeUndefined();
    } finally {
      removeImages(bare);
    }
    expect(await rt.controlUiRoot(`agent-platform-test-missing-${testRun}:1`)).toBeUndefined();
  });

  it("exports and imports a volume, leaving no volume of its helpers behind", async () => {
    const source = `agent-${testRun}-archive-src`;
    const target = `agent-${testRun}-archive-dst`;
    await rt.ensureVolume(source, testLabels());
    await rt.ensureVolume(target, testLabels());
    // The helper is created from the gateway image, whose VOLUME gives it an anonymous volume.
    const helperVolume = () =>
      waitFor(
        async () => {
          const labels = { ...testLabels(), [LABELS.role]: "one-shot" };
          const filters = { label: Object.entries(labels).map(([k, v]) => `${k}=${v}`) };
          const [helper] = await rt.docker.listContainers({ all: true, filters });
          if (!helper) return undefined;
          const c = await rt.docker.getContainer(helper.Id).inspect();
          return c.Mounts.find((m) => m.Destination === "/home/node/.openclaw")?.Name;
        },
        { what: "a volume helper" },
      );
    const gone = (name: string) =>
      rt.docker
        .getVolume(name)
        .inspect()
        .then(
          () => false,
          (error: { statusCode?: number }) => error.statusCode === 404,
        );

    const archive = await rt.exportVolume(source, GATEWAY_IMAGE, testLabels());
    const exportVolume = await helperVolume();
    const chunks: Buffer[] = [];
    for await (const chunk of archive) chunks.push(Buffer.from(chunk as Buffer));
    await waitFor(() => gone(exportVolume), {
      timeoutMs: 10_000,
      what: "the export helper's volume removed",
    });

    const input = new PassThrough();
    const importing = rt.importVolume(target, GATEWAY_IMAGE, input, testLabels());
    const importVolume = await helperVolume();
    input.end(Buffer.concat(chunks));
    await importing;
    expect(await gone(importVolume)).toBe(true);
    await rt.removeVolume(source);
    await rt.removeVolume(target);
  });
});

it("reports an unreachable engine as RuntimeUnavailableError", async () => {
  const dead = new DockerRuntime({ socketPath: "/nonexistent/docker.sock" });
  await expect(dead.ping()).rejects.toBeInstanceOf(RuntimeUnavailableError);
  await expect(dead.inspect("x")).rejects.toBeInstanceOf(RuntimeUnavailableError);
});
