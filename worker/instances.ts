import {
  applyChannels,
  channelSettings,
  channelsPatch,
} from "../app/server/agents/channels.server.ts";
import { PLATFORM_HEARTBEAT } from "../app/server/agents/heartbeat.server.ts";
import {
  deleteInstanceRecord,
  gatewayTokenOf,
  getInstance,
  getInstanceByUser,
  type InstancePatch,
  type InstanceRow,
  listInstances,
  recordError,
  updateInstance,
} from "../app/server/agents/instances.server.ts";
import {
  issueInstanceToken,
  revokeInstanceTokens,
} from "../app/server/ai/instance-tokens.server.ts";
import { GatewayClient, type HelloOk } from "../app/server/openclaw/client.server.ts";
import {
  type DeviceIdentity,
  deviceIdentityFromPrivateKey,
  generateDeviceIdentity,
} from "../app/server/openclaw/device-identity.server.ts";
import {
  GatewayRequestError,
  GatewayUnavailableError,
} from "../app/server/openclaw/errors.server.ts";
import { gatewayHealthy } from "../app/server/openclaw/health.server.ts";
import { seal, unseal } from "../app/server/platform/crypto.server.ts";
import { db } from "../app/server/platform/db.server.ts";
import { env } from "../app/server/platform/env.server.ts";
import { sendJob } from "../app/server/platform/jobs.server.ts";
import { logger } from "../app/server/platform/logger.server.ts";
import { adoptFromPool, pooledContainerNames } from "./pool.ts";
import {
  type AgentRuntime,
  type ContainerInfo,
  gatewayEndpoint,
  getRuntime,
  LABELS,
  limitsForPlan,
  RuntimeUnavailableError,
} from "./runtime/index.ts";
import { queueWarmUp, warmUpTenant } from "./warm-up.ts";

// Worker-side instance operations: everything that touches Docker or a gateway. Each is
// idempotent (looks before it creates; containers are keyed by the instance's name) and runs
// under a per-instance advisory lock, so two deliveries of a job never act at once.

export const GATEWAY_PORT = 18789;
export const STATE_DIR = "/home/node/.openclaw";
const CONFIG_PATH = `${STATE_DIR}/openclaw.json`;

/** Label telling this platform's objects apart from another deployment's on the same engine. */
export const DEPLOYMENT_LABEL = "agent-platform.deployment";
export const deployment = () => process.env.RUNTIME_DEPLOYMENT || "default";

export const rt = (): AgentRuntime => getRuntime();

/** Runs `fn` holding a session advisory lock for the instance (one operation at a time). */
export async function withInstanceLock<T>(instanceId: string, fn: () => Promise<T>): Promise<T> {
  const conn = await db().reserve();
  try {
    await conn`select pg_advisory_lock(hashtext(${`instance:${instanceId}`}))`;
    try {
      return await fn();
    } finally {
      await conn`select pg_advisory_unlock(hashtext(${`instance:${instanceId}`}))`;
    }
  } finally {
    conn.release();
  }
}

/** Is this failure "the backend did not answer" (502) rather than an internal error (500)? */
export function isUnavailable(error: unknown): boolean {
  return error instanceof RuntimeUnavailableError || error instanceof GatewayUnavailableError;
}

export function gatewayAddress(info: ContainerInfo | undefined): string | undefined {
  return gatewayEndpoint(info, GATEWAY_PORT);
}

/** The platform's AI endpoint as a container sees it (the network's gateway IP by default). */
export async function platformAiBaseUrl(gatewayIp: string | undefined): Promise<string> {
  const { RUNTIME_PLATFORM_AI_URL, PORT } = env();
  if (RUNTIME_PLATFORM_AI_URL) return RUNTIME_PLATFORM_AI_URL.replace(/\/$/, "");
  return `http://${gatewayIp ?? "127.0.0.1"}:${PORT}/api/ai/v1`;
}

/**
 * The gateway's config: token auth, device auth on, no extra origins, the platform as provider.
 * `initial`: the config a new gateway starts from, which also carries the platform's defaults of
 * settings users own afterwards (the heartbeat); later patches leave those alone.
 */
export function gatewayConfig(options: {
  aiBaseUrl: string;
  aiToken: string;
  model: string;
  initial?: boolean;
}) {
  const [vendor, ...rest] = options.model.split("/");
  const modelId = rest.length ? options.model : `${vendor}`;
  return {
    gateway: {
      mode: "local",
      bind: "lan",
      port: GATEWAY_PORT,
      auth: { mode: "token" },
      http: { endpoints: { chatCompletions: { enabled: true } } },
      // The platform serves its own UI; OpenClaw's Control UI would add ~53 MB per volume.
      controlUi: { enabled: false },
      // No host PTY over the control protocol: the platform never opens one, so nobody can.
      terminal: { enabled: false },
    },
    agents: {
      defaults: {
        skipBootstrap: true,
        model: { primary: `platform/${modelId}` },
        ...(options.initial ? { heartbeat: { ...PLATFORM_HEARTBEAT } } : {}),
      },
    },
    // Each chat-channel sender gets their own session (OpenClaw's default shares one "main"
    // session across every DM): people do not see each other's context, and the platform can
    // tell a conversation's channel from its session key (agent:<id>:telegram:direct:<peer>).
    session: { dmScope: "per-channel-peer" },
    // Skill folders arrive as archives the platform checked (app/server/skills, decision 0111).
    skills: { install: { allowUploadedArchives: true } },
    models: {
      mode: "merge",
      providers: {
        platform: {
          baseUrl: options.aiBaseUrl,
          apiKey: options.aiToken,
          api: "openai-completions",
          models: [{ id: modelId, name: modelId }],
        },
      },
    },
  };
}

function containerLabels(_row: InstanceRow): Record<string, string> {
  return { [DEPLOYMENT_LABEL]: deployment() };
}

/** Writes `config` as the gateway's config file into `volume` unless one is there already. */
export async function writeConfigIfAbsent(
  volume: string,
  image: string,
  config: () => Promise<unknown>,
): Promise<boolean> {
  const labels = { [DEPLOYMENT_LABEL]: deployment() };
  const exists = await rt().runOnce({
    image,
    volume,
    volumeTarget: STATE_DIR,
    entrypoint: ["sh", "-c"],
    cmd: [`test -s ${CONFIG_PATH}`],
    labels,
  });
  if (exists.exitCode === 0) return false;
  // The config travels base64-encoded in the one-shot container's environment; that
  // container is removed at once. umask 077: the file is the gateway user's only.
  const written = await rt().runOnce({
    image,
    volume,
    volumeTarget: STATE_DIR,
    entrypoint: ["sh", "-c"],
    cmd: [
      `umask 077 && echo "$CONFIG_B64" | base64 -d > ${CONFIG_PATH}.tmp && mv ${CONFIG_PATH}.tmp ${CONFIG_PATH}`,
    ],
    env: { CONFIG_B64: Buffer.from(JSON.stringify(await config())).toString("base64") },
    labels,
  });
  if (written.exitCode !== 0) {
    throw new Error(`writing the gateway config failed: ${written.stderr.slice(0, 500)}`);
  }
  return true;
}

async function writeInitialConfig(row: InstanceRow, image: string, gatewayIp: string | undefined) {
  // Only on an empty volume: an existing config (and the token inside it) is kept; later changes
  // go through config.patch. A new model-endpoint token replaces any earlier one.
  await writeConfigIfAbsent(row.volume_name, image, async () => {
    await revokeInstanceTokens(row.id);
    return gatewayConfig({
      aiBaseUrl: await platformAiBaseUrl(gatewayIp),
      aiToken: await issueInstanceToken(row.user_id, row.id),
      model: row.model ?? env().RUNTIME_DEFAULT_MODEL,
      initial: true,
    });
  });
}

/**
 * Creates (when missing) and starts the container; returns its inspect data. An instance stays
 * on the image id it runs (`image_id`) even when its tag is rebuilt (gateway/build.sh keeps the
 * tag, the OpenClaw version): start, restart, repair and a healed crash never change the
 * gateway under a tenant; only `update` moves it (`image` names the tag to move to), and a
 * rollback pins the previous id again (`imageId`).
 */
export async function ensureContainer(
  row: InstanceRow,
  options: { image?: string; imageId?: string; recreate?: boolean } = {},
): Promise<ContainerInfo> {
  const tag = options.image ?? row.image ?? env().AGENT_GATEWAY_IMAGE;
  const pin = options.imageId ?? (options.image ? undefined : row.image_id);
  const tagId = await rt().imageId(tag);
  // By tag while the tag still names the pinned id (readable in `docker ps`), else by id; a
  // pinned id that is gone (pruned by an operator) falls back to the tag.
  const pinned = pin && pin !== tagId ? await rt().imageId(pin) : undefined;
  const image = pinned ?? tag;
  const wantedId = pinned ?? tagId;
  const { gatewayIp } = await rt().ensureNetwork(env().RUNTIME_NETWORK, {
    [DEPLOYMENT_LABEL]: deployment(),
  });
  await rt().ensureVolume(row.volume_name, {
    [LABELS.instanceId]: row.id,
    [LABELS.userId]: row.user_id,
    [DEPLOYMENT_LABEL]: deployment(),
  });
  let info = await rt().inspect(row.container_name);
  if (info && (options.recreate || (wantedId !== undefined && info.imageId !== wantedId))) {
    // Graceful stop first: the gateway releases its state lease (gateway/README.md).
    if (info.running) await rt().stop(info.id, 10);
    await rt().remove(info.id);
    info = undefined;
  }
  if (!info) {
    await writeInitialConfig(row, image, gatewayIp);
    const id = await rt().create({
      instanceId: row.id,
      userId: row.user_id,
      image,
      name: row.container_name,
      hostname: row.container_name,
      volume: row.volume_name,
      volumeTarget: STATE_DIR,
      network: env().RUNTIME_NETWORK,
      limits: limitsForPlan(row.plan),
      env: { OPENCLAW_GATEWAY_TOKEN: gatewayTokenOf(row) },
      labels: containerLabels(row),
      restartPolicy: "on-failure",
    });
    info = await rt().inspect(id);
  }
  if (!info) throw new Error("container vanished after create");
  if (!info.running) {
    await rt().start(info.id);
    info = (await rt().inspect(info.id)) ?? info;
  }
  await updateInstance(row.id, {
    driver: rt().driver,
    container_id: info.id,
    image: tag,
    image_id: info.imageId,
    gateway_address: gatewayAddress(info) ?? null,
    started_at: info.startedAt ? new Date(info.startedAt) : null,
    observed_state: "starting",
    observed_at: new Date(),
  });
  return info;
}

export async function waitHealthy(
  info: ContainerInfo,
  timeoutMs = env().GATEWAY_HEALTH_TIMEOUT_MS,
) {
  const address = gatewayAddress(info);
  if (!address) throw new GatewayUnavailableError("the container has no network address");
  // Fail early when the container stops instead of waiting for the whole bound.
  const started = Date.now();
  for (;;) {
    if (await gatewayHealthy(address, 2_000)) return Date.now() - started;
    const now = await rt().inspect(info.id);
    if (!now?.running) {
      throw new GatewayUnavailableError(
        `the gateway container stopped before /healthz answered (exit ${now?.exitCode}${now?.oomKilled ? ", OOMKilled" : ""})`,
      );
    }
    if (Date.now() - started > timeoutMs) {
      throw new GatewayUnavailableError(`no /healthz within ${timeoutMs} ms`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** The platform's device identity for this instance (created and sealed on first use). */
async function deviceOf(row: InstanceRow): Promise<{ row: InstanceRow; device: DeviceIdentity }> {
  if (row.device_private_key_sealed) {
    return { row, device: deviceIdentityFromPrivateKey(unseal(row.device_private_key_sealed)) };
  }
  const device = generateDeviceIdentity();
  const next = await updateInstance(row.id, {
    device_id: device.deviceId,
    device_private_key_sealed: seal(device.privateKeyPem),
  });
  return { row: next, device };
}

export function clientFor(row: InstanceRow, device: DeviceIdentity, address: string) {
  return new GatewayClient({
    url: `ws://${address}`,
    token: gatewayTokenOf(row),
    device,
    connectTimeoutMs: 15_000,
    requestTimeoutMs: 15_000,
    reconnect: false,
  });
}

/**
 * Connects as the platform's operator device, pairing it first when the gateway does not know
 * it: the gateway answers NOT_PAIRED with a requestId, which `openclaw devices approve` inside
 * the container approves (the CLI reaches the gateway over loopback with the instance token).
 */
export async function connectWithPairing(target: {
  container: string;
  address: string;
  token: string;
  device: DeviceIdentity;
}): Promise<{ client: GatewayClient; hello: HelloOk }> {
  const approved = new Set<string>();
  for (let attempt = 0; ; attempt++) {
    const client = new GatewayClient({
      url: `ws://${target.address}`,
      token: target.token,
      device: target.device,
      connectTimeoutMs: 15_000,
      requestTimeoutMs: 15_000,
      reconnect: false,
    });
    try {
      return { client, hello: await client.connect() };
    } catch (error) {
      client.close();
      if (!(error instanceof GatewayRequestError) || attempt >= 12) throw error;
      const notPaired = /NOT_PAIRED|PAIRING/i.test(`${error.code} ${error.message}`);
      const retryable =
        notPaired ||
        error.code === "UNAVAILABLE" ||
        /startup/i.test(String(error.details?.reason ?? ""));
      if (!retryable) throw error;
      const requestId = pairingRequestId(error);
      if (requestId && !approved.has(requestId)) {
        // Approve once per request; an approval lands asynchronously, so a NOT_PAIRED right
        // after it (with the same or no request id) is retried after a short wait.
        const result = await rt().exec(
          target.container,
          ["node", "openclaw.mjs", "devices", "approve", requestId],
          { timeoutMs: 60_000 },
        );
        if (result.exitCode !== 0) {
          throw new Error(
            `devices approve failed: ${(result.stderr || result.stdout).slice(0, 500)}`,
          );
        }
        approved.add(requestId);
      } else {
        await new Promise((r) => setTimeout(r, Math.min(250 * (attempt + 1), 3_000)));
      }
    }
  }
}

/** connectWithPairing for an instance; records version, device token and pairing time. */
export async function connectPaired(
  row: InstanceRow,
  address: string,
): Promise<{ client: GatewayClient; hello: HelloOk; row: InstanceRow }> {
  const { row: current, device } = await deviceOf(row);
  const { client, hello } = await connectWithPairing({
    container: current.container_id ?? current.container_name,
    address,
    token: gatewayTokenOf(current),
    device,
  });
  const patch: InstancePatch = { gateway_version: hello.server.version };
  if (hello.auth?.deviceToken) patch.device_token_sealed = seal(hello.auth.deviceToken);
  if (!current.paired_at) patch.paired_at = new Date();
  return { client, hello, row: await updateInstance(current.id, patch) };
}

function pairingRequestId(error: GatewayRequestError): string | undefined {
  const id = error.details?.requestId;
  return typeof id === "string" && id.length > 0 ? id : undefined;
}

/** provision-instance: volume, config, container, pairing, healthy. Idempotent. */
export async function provision(instanceId: string) {
  return withInstanceLock(instanceId, async () => {
    let row = await getInstance(instanceId);
    if (!row) return { skipped: "no such instance" };
    const t0 = Date.now();
    await updateInstance(row.id, { observed_state: "provisioning", desired_state: "running" });
    if (!row.container_id) {
      const adopted = await adoptFromPool(row);
      if (adopted) {
        await sendJob("fill-pool", {}).catch(() => {}); // refill in the background
        return {
          instanceId,
          adopted: adopted.container_name,
          healthyMs: Date.now() - t0,
          readyMs: Date.now() - t0,
          version: adopted.gateway_version,
        };
      }
    }
    try {
      const info = await ensureContainer(row);
      await waitHealthy(info);
      const healthyMs = Date.now() - t0;
      row = (await getInstance(instanceId)) as InstanceRow;
      // A gateway paired now is new (a retried or repeated provisioning finds it paired).
      const fresh = !row.paired_at;
      const {
        client,
        hello,
        row: paired,
      } = await connectPaired(row, gatewayAddress(info) as string);
      try {
        await client.request("health");
        // Channels the user provisioned before the container existed (POST /api/provision).
        const channels = await channelSettings(paired.user_id);
        if (Object.keys(channels).length > 0) await applyChannels(client, channels);
        if (fresh && env().RUNTIME_COLD_WARMUP === "on") {
          await warmUpTenant(client, paired, info.id);
        }
      } finally {
        client.close();
      }
      await updateInstance(paired.id, {
        observed_state: "running",
        health: "healthy",
        observed_at: new Date(),
        crash_restarts: 0,
        last_error: null,
      });
      return { instanceId, healthyMs, readyMs: Date.now() - t0, version: hello.server.version };
    } catch (error) {
      await recordError(instanceId, `provision: ${(error as Error).message}`, {
        observed_state: "error",
      });
      throw error;
    }
  });
}

/** Reads the container and gateway state into the row (used after every action). */
export async function observe(row: InstanceRow): Promise<InstanceRow> {
  const info = await rt().inspect(row.container_name);
  if (!info) {
    return updateInstance(row.id, {
      observed_state: row.container_id ? "missing" : "new",
      health: "unknown",
      observed_at: new Date(),
    });
  }
  const address = gatewayAddress(info);
  let observed: InstanceRow["observed_state"];
  let health: InstanceRow["health"] = "unknown";
  if (info.running) {
    const ok = address ? await gatewayHealthy(address, 2_000) : false;
    health = ok ? "healthy" : "unhealthy";
    observed = ok ? "running" : "starting";
  } else if (info.oomKilled) observed = "oom_killed";
  else if (info.state === "exited" && row.desired_state === "running" && info.exitCode !== 0)
    observed = "crashed";
  else observed = "stopped";
  return updateInstance(row.id, {
    container_id: info.id,
    observed_state: observed,
    health,
    gateway_address: address ?? row.gateway_address,
    started_at: info.startedAt ? new Date(info.startedAt) : row.started_at,
    observed_at: new Date(),
  });
}

/** Writes one live sample (stats) of a running instance into its row. */
export async function sample(row: InstanceRow): Promise<void> {
  if (!row.container_id) return;
  const info = await rt().inspect(row.container_id);
  if (!info?.running) return;
  const s = await rt().stats(info.id);
  await updateInstance(row.id, {
    cpu_percent: s.cpuPercent,
    memory_bytes: s.memoryBytes,
    memory_limit_bytes: s.memoryLimitBytes,
    pids: s.pids,
    network_rx_bytes: s.rxBytes,
    network_tx_bytes: s.txBytes,
    sampled_at: new Date(),
  });
}

export const log = () => logger().child({ area: "instances" });

// --- lifecycle actions (instance-action job) -------------------------------------------------

export async function runAction(
  row: InstanceRow,
  action: "start" | "stop" | "restart" | "repair" | "reset-memory",
): Promise<{ ok: true; status?: string; message?: string }> {
  switch (action) {
    case "start": {
      row = await updateInstance(row.id, { desired_state: "running", crash_restarts: 0 });
      await ensureContainer(row);
      return { ok: true, status: "running" };
    }
    case "stop": {
      row = await updateInstance(row.id, { desired_state: "stopped" });
      const info = await rt().inspect(row.container_name);
      if (info?.running) await rt().stop(info.id, 10);
      await updateInstance(row.id, {
        observed_state: "stopped",
        health: "unknown",
        observed_at: new Date(),
      });
      return { ok: true, status: "stopped" };
    }
    case "restart": {
      row = await updateInstance(row.id, { desired_state: "running", crash_restarts: 0 });
      const info = await rt().inspect(row.container_name);
      if (info?.running) {
        await rt().restart(info.id, 10);
        const now = await rt().inspect(info.id);
        await updateInstance(row.id, {
          observed_state: "starting",
          health: "unknown",
          gateway_address: gatewayAddress(now) ?? row.gateway_address,
          started_at: now?.startedAt ? new Date(now.startedAt) : row.started_at,
          observed_at: new Date(),
        });
      } else {
        await ensureContainer(row);
      }
      return { ok: true, status: "running" };
    }
    case "repair": {
      // Recreate the container from the same volume, then re-apply the platform's config.
      row = await updateInstance(row.id, { desired_state: "running", crash_restarts: 0 });
      const info = await ensureContainer(row, { recreate: true });
      await waitHealthy(info);
      const fresh = (await getInstance(row.id)) as InstanceRow;
      await reapplyConfig(fresh, gatewayAddress(info) as string);
      await observe(fresh);
      return {
        ok: true,
        message: "Instance repaired: container recreated, configuration re-applied",
      };
    }
    case "reset-memory": {
      const info = await rt().inspect(row.container_name);
      const address = gatewayAddress(info);
      if (!info?.running || !address) {
        throw new GatewayUnavailableError("the gateway is not running");
      }
      const { client } = await connectPaired(row, address);
      try {
        const list = await client.request<{ sessions?: Array<{ key?: string }> }>(
          "sessions.list",
          {},
        );
        let cleared = 0;
        for (const s of list.sessions ?? []) {
          if (!s.key) continue;
          await forgetSession(client, info.id, s.key);
          cleared++;
        }
        // Every agent's long-term memory: MEMORY.md emptied, its daily notes (memory/) removed.
        const agents = await client.request<{ agents?: Array<{ id?: string }> }>("agents.list", {});
        const ids = (agents.agents ?? []).flatMap((a) => (a.id ? [a.id] : []));
        for (const agentId of ids.length ? ids : ["main"]) {
          await client.request("agents.files.set", { agentId, name: "MEMORY.md", content: "" });
        }
        const notes = await rt().exec(
          info.id,
          // The runtime's own state folder (the process driver's is not STATE_DIR); refused
          // when unset rather than resolving to /workspace.
          [
            "sh",
            "-c",
            'd="$OPENCLAW_STATE_DIR"; test -n "$d" && rm -rf -- "$d"/workspace/memory "$d"/workspace-*/memory',
          ],
          { timeoutMs: 30_000 },
        );
        if (notes.exitCode !== 0) {
          throw new Error(
            `removing the agents' memory notes failed: ${notes.stderr.slice(0, 300)}`,
          );
        }
        return {
          ok: true,
          message: `Memory reset: ${cleared} session(s) cleared, memory of ${Math.max(ids.length, 1)} agent(s) emptied`,
        };
      } finally {
        client.close();
      }
    }
  }
}

/**
 * Deletes a session and its transcript, including the copy the gateway archives on delete.
 * The session is reset first: a used session deleted straight away leaves its reclamation to
 * the gateway's next turn, which then took 3.7–5.7 s instead of 0.8–1.0 s (a new SQLite worker
 * thread, ~2 s of CPU); reset first, the delete does that work itself (decision 0038). Used by
 * the warm pool's dry run and by reset-memory.
 */
export async function forgetSession(
  client: GatewayClient,
  containerId: string,
  key: string,
): Promise<void> {
  await client.request("sessions.reset", { key }, { timeoutMs: 120_000 });
  // Deleting takes the gateway 1–20 s on a busy machine (SQLite reclamation).
  const result = await client.request<{ archived?: string[] }>(
    "sessions.delete",
    { key, deleteTranscript: true },
    { timeoutMs: 120_000 },
  );
  const archived = (result.archived ?? []).filter((p) => p.startsWith(`${STATE_DIR}/`));
  if (archived.length === 0) return;
  const removed = await rt().exec(containerId, ["rm", "-f", "--", ...archived], {
    timeoutMs: 30_000,
  });
  if (removed.exitCode !== 0) {
    throw new Error(`removing the warm-up transcript failed: ${removed.stderr.slice(0, 300)}`);
  }
}

/**
 * Patches the platform's part of a gateway's config over a paired connection: the gateway
 * settings, the platform AI endpoint with a fresh model-endpoint token (older ones revoked), and
 * the instance's model.
 */
export async function applyPlatformConfig(
  client: ReturnType<typeof clientFor>,
  row: Pick<InstanceRow, "id" | "user_id" | "model">,
): Promise<void> {
  const { gatewayIp } = await rt().ensureNetwork(env().RUNTIME_NETWORK, {
    [DEPLOYMENT_LABEL]: deployment(),
  });
  await revokeInstanceTokens(row.id);
  const config = {
    ...gatewayConfig({
      aiBaseUrl: await platformAiBaseUrl(gatewayIp),
      aiToken: await issueInstanceToken(row.user_id, row.id),
      model: row.model ?? env().RUNTIME_DEFAULT_MODEL,
    }),
    // The user's messaging channels (and their plugins' enablement) survive repair and pool
    // adoption.
    ...channelsPatch(await channelSettings(row.user_id)),
  };
  await patchConfig(client, config);
}

/** Merges `config` into the gateway's config (hot reload; the base hash guards a race). */
export async function patchConfig(
  client: ReturnType<typeof clientFor>,
  config: Record<string, unknown>,
): Promise<void> {
  const current = await client.request<{ hash: string }>("config.get");
  await client.request(
    "config.patch",
    { baseHash: current.hash, raw: JSON.stringify(config) },
    { timeoutMs: 30_000 },
  );
}

/** Re-applies the platform's part of the config (repair, reset). */
export async function reapplyConfig(row: InstanceRow, address: string): Promise<void> {
  const { client } = await connectPaired(row, address);
  try {
    await applyPlatformConfig(client, row);
  } finally {
    client.close();
  }
}

// --- update-image -------------------------------------------------------------------------------

/** Copies the state volume into `<volume>-prev` (replacing an older snapshot), or back. */
export async function snapshotVolume(
  row: InstanceRow,
  image: string,
  direction: "save" | "restore",
): Promise<void> {
  const snapshot = `${row.volume_name}-prev`;
  await rt().ensureVolume(snapshot, {
    [LABELS.instanceId]: row.id,
    [LABELS.userId]: row.user_id,
    [DEPLOYMENT_LABEL]: deployment(),
  });
  const [from, to] = direction === "save" ? ["/state", "/snapshot"] : ["/snapshot", "/state"];
  const copied = await rt().runOnce({
    image,
    volume: row.volume_name,
    volumeTarget: "/state",
    extraVolumes: { [snapshot]: "/snapshot" },
    entrypoint: ["sh", "-c"],
    // As root with only the capabilities a faithful copy needs (owners and modes kept); a new
    // snapshot volume's root is root-owned. No network, removed at once.
    user: "0",
    capAdd: ["CHOWN", "DAC_OVERRIDE", "FOWNER"],
    cmd: [
      `rm -rf ${to}/* ${to}/.[!.]* && cp -a ${from}/. ${to}/ && chown 1000:1000 ${to} && chmod 700 ${to}`,
    ],
    labels: { [DEPLOYMENT_LABEL]: deployment() },
    timeoutMs: 300_000,
  });
  if (copied.exitCode !== 0) {
    throw new Error(`volume ${direction} failed: ${copied.stderr.slice(0, 500)}`);
  }
}

/**
 * Recreates the container on the newest build of the configured image tag, keeping the volume.
 * Images are compared by id, so a tag rebuilt in place (new plugins, a new base) is an update
 * too. The state is snapshotted first (the gateway stopped, so the copy is consistent); when the
 * new gateway is not healthy within the bound, the previous image — by id, since its tag may
 * now name the new build — and the snapshot come back, and why is recorded.
 */
export async function updateImage(instanceId: string) {
  return withInstanceLock(instanceId, async () => {
    const row = await getInstance(instanceId);
    if (!row) return { skipped: "no such instance" };
    const target = env().AGENT_GATEWAY_IMAGE;
    const targetId = await rt().imageId(target);
    if (!targetId) {
      // Nothing is stopped or touched for an image that is not there.
      const reason = `update to ${target} failed: the image is not built`;
      await recordError(row.id, reason);
      return { failed: reason };
    }
    const current = await rt().inspect(row.container_name);
    if (current?.running && current.imageId === targetId) return { unchanged: target };
    const previousTag = row.image ?? target;
    const previousId = current?.imageId ?? row.image_id ?? undefined;
    const previous = previousId ?? previousTag;
    await updateInstance(row.id, { observed_state: "updating", desired_state: "running" });
    if (current?.running) await rt().stop(current.id, 10); // releases the state lease
    await snapshotVolume(row, previous, "save");
    try {
      const info = await ensureContainer(row, { image: target, recreate: true });
      await waitHealthy(info);
      await observe((await getInstance(row.id)) as InstanceRow);
      return { updated: target, imageId: targetId, from: previous };
    } catch (error) {
      const reason = `update to ${target} failed: ${(error as Error).message}`;
      log().warn({ instanceId, err: error }, "update-image failed; rolling back");
      const failed = await rt().inspect(row.container_name);
      if (failed?.running) await rt().stop(failed.id, 10);
      await snapshotVolume(row, previous, "restore");
      const info = await ensureContainer(row, {
        image: previousTag,
        imageId: previousId,
        recreate: true,
      });
      await waitHealthy(info).catch(() => {});
      await observe((await getInstance(row.id)) as InstanceRow);
      await recordError(
        row.id,
        `${reason}; rolled back to ${previousTag} (${previous}) and the state snapshot`,
      );
      return { rolledBack: previousTag, imageId: previousId, reason };
    }
  });
}

// --- reconcile ----------------------------------------------------------------------------------

const BACKOFF_BASE_MS = 10_000;
const BACKOFF_MAX_MS = 10 * 60_000;

/** Like withInstanceLock, but skips (returns undefined) when another operation holds it. */
async function tryInstanceLock<T>(
  instanceId: string,
  fn: () => Promise<T>,
): Promise<T | undefined> {
  const conn = await db().reserve();
  try {
    const [got] = await conn<{ ok: boolean }[]>`
      select pg_try_advisory_lock(hashtext(${`instance:${instanceId}`})) as ok`;
    if (!got?.ok) return undefined;
    try {
      return await fn();
    } finally {
      await conn`select pg_advisory_unlock(hashtext(${`instance:${instanceId}`}))`;
    }
  } finally {
    conn.release();
  }
}

export async function reconcileOne(row: InstanceRow): Promise<string> {
  if (!row.container_id) return "not provisioned";
  const info = await rt().inspect(row.container_name);
  if (row.desired_state === "stopped") {
    if (info?.running) await rt().stop(info.id, 10);
    await observe(row);
    return info?.running ? "stopped" : "ok";
  }
  if (info?.running) {
    const seen = await observe(row);
    if (seen.health === "healthy" && row.crash_restarts > 0) {
      await updateInstance(row.id, { crash_restarts: 0, next_restart_at: null });
    }
    return "ok";
  }
  // Desired running, but the container is gone or not running: record why, then heal with backoff.
  const patch: InstancePatch = { observed_at: new Date(), health: "unknown" };
  if (!info) {
    patch.observed_state = "missing";
    patch.last_error = "container missing";
  } else if (info.oomKilled) {
    patch.observed_state = "oom_killed";
    const finished = info.finishedAt ? new Date(info.finishedAt) : new Date();
    // Count each kill once (a later pass sees the same finishedAt).
    if (!row.last_error_at || row.last_error_at < finished) {
      patch.oom_kills = row.oom_kills + 1;
      patch.last_error = `out of memory: the gateway was killed at its ${Math.round(info.limits.memoryBytes / 1024 ** 2)} MiB limit (OOMKilled)`;
      patch.last_error_at = new Date();
    }
  } else {
    patch.observed_state = "crashed";
    const finished = info.finishedAt ? new Date(info.finishedAt) : new Date();
    if (!row.last_error_at || row.last_error_at < finished) {
      patch.last_error = `gateway exited with code ${info.exitCode}`;
      patch.last_error_at = new Date();
    }
  }
  const now = Date.now();
  if (row.next_restart_at && row.next_restart_at.getTime() > now) {
    await updateInstance(row.id, patch);
    return `${patch.observed_state}, restart due ${row.next_restart_at.toISOString()}`;
  }
  const delay = Math.min(BACKOFF_BASE_MS * 2 ** row.crash_restarts, BACKOFF_MAX_MS);
  patch.crash_restarts = row.crash_restarts + 1;
  patch.next_restart_at = new Date(now + delay);
  const recorded = await updateInstance(row.id, patch);
  await ensureContainer(recorded);
  await queueWarmUp(row.id);
  return `${patch.observed_state}, restarted`;
}

export async function reconcileAll() {
  const rows = await listInstances();
  const byId = new Set(rows.map((r) => r.id));
  const known = new Set([...rows.map((r) => r.container_name), ...(await pooledContainerNames())]);
  const orphans: string[] = [];
  for (const c of await rt().list({
    [LABELS.managed]: "1",
    [LABELS.role]: "gateway",
    [DEPLOYMENT_LABEL]: deployment(),
  })) {
    const instanceId = c.labels[LABELS.instanceId];
    if ((instanceId && byId.has(instanceId)) || known.has(c.name)) continue;
    await rt().remove(c.id);
    orphans.push(c.name);
  }
  const results: Record<string, string> = {};
  for (const row of rows) {
    try {
      results[row.id] =
        (await tryInstanceLock(row.id, async () => {
          const fresh = await getInstance(row.id);
          return fresh ? reconcileOne(fresh) : "gone";
        })) ?? "busy";
    } catch (error) {
      results[row.id] = `error: ${(error as Error).message}`;
      if (!isUnavailable(error))
        await recordError(row.id, `reconcile: ${(error as Error).message}`);
      else throw error; // the engine is down: nothing else will work either
    }
  }
  if (orphans.length) log().warn({ orphans }, "reconcile removed orphan containers");
  // Docker's /system/df walks every volume: measure when a size is missing or getting old,
  // not every minute.
  const stale = Date.now() - env().STORAGE_MEASURE_INTERVAL_MS;
  const due = rows.some((r) => !r.storage_measured_at || r.storage_measured_at.getTime() <= stale);
  const storageMeasured = due ? await measureStorage(rows) : 0;
  return { instances: results, orphansRemoved: orphans, storageMeasured };
}

/** Records the size of every instance's state volume (the files dashboard's "used"). */
export async function measureStorage(rows?: InstanceRow[]): Promise<number> {
  const sizes = await rt().volumeSizes();
  let n = 0;
  for (const row of rows ?? (await listInstances())) {
    const bytes = sizes.get(row.volume_name);
    if (bytes === undefined) continue;
    await updateInstance(row.id, { storage_bytes: bytes, storage_measured_at: new Date() });
    n++;
  }
  return n;
}

/** Live samples for every instance with a container (the worker runs this every few seconds). */
export async function sampleAll(): Promise<number> {
  let n = 0;
  for (const row of await listInstances()) {
    if (!row.container_id) continue;
    try {
      const seen = await observe(row);
      await sample(seen);
      n++;
    } catch (error) {
      if (isUnavailable(error)) throw error;
      log().warn({ err: error, instanceId: row.id }, "sampling failed");
    }
  }
  return n;
}

// --- teardown -----------------------------------------------------------------------------------

/** What teardown needs of an instance; the row itself is gone once the account is deleted. */
type TeardownTarget = Pick<InstanceRow, "id" | "user_id" | "container_name" | "volume_name">;

async function teardownTarget(userId: string): Promise<TeardownTarget | undefined> {
  const row = await getInstanceByUser(userId);
  if (row) return row;
  // Kept by a trigger when the account's deletion cascaded to the row (migration 0015).
  const [kept] = await db()<{ instance_id: string; container_name: string; volume_name: string }[]>`
    select instance_id, container_name, volume_name from instance_teardowns
    where user_id = ${userId} order by deleted_at desc limit 1`;
  return kept && { id: kept.instance_id, user_id: userId, ...kept };
}

/** Removes the user's container(s), state volume, model-endpoint tokens and record. Idempotent. */
export async function teardown(userId: string) {
  const row = await teardownTarget(userId);
  const containers = await rt().list({ [LABELS.userId]: userId, [DEPLOYMENT_LABEL]: deployment() });
  const run = async () => {
    for (const c of containers) await rt().remove(c.id);
    if (!row) return { userId, instancesFound: 0, containersRemoved: containers.length };
    const info = await rt().inspect(row.container_name);
    if (info) await rt().remove(info.id);
    await rt().removeVolume(row.volume_name);
    await rt().removeVolume(`${row.volume_name}-prev`);
    const revoked = await revokeInstanceTokens(row.id);
    await deleteInstanceRecord(row.id);
    await db()`delete from instance_teardowns where instance_id = ${row.id}`;
    return {
      userId,
      instancesFound: 1,
      containersRemoved:
        containers.length + (info && !containers.some((c) => c.id === info.id) ? 1 : 0),
      volumeRemoved: row.volume_name,
      tokensRevoked: revoked,
    };
  };
  return row ? withInstanceLock(row.id, run) : run();
}
