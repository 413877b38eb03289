import { afterAll, beforeAll, expect, it } from "vitest";
import { storeChannelCredential } from "../../app/server/agents/channels.server.ts";
import { getInstance, type InstanceRow } from "../../app/server/agents/instances.server.ts";
import {
  authenticateInstanceToken,
  issueInstanceToken,
} from "../../app/server/ai/instance-tokens.server.ts";
import { closeGatewayClients } from "../../app/server/openclaw/connections.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { getBoss } from "../../app/server/platform/jobs.server.ts";
import {
  applyPlatformConfig,
  PLATFORM_CONFIG_VERSION,
  reapplyConfig,
} from "../../worker/instances/gateway-config.ts";
import { connectPaired } from "../../worker/instances/pairing.ts";
import { createFakeGateway, FAKE_GATEWAY_ADDRESS, pairedInstanceAt } from "./fake-gateway.ts";
import { agentUser } from "./support.ts";

// Re-applying the platform's part of a gateway's config (repair, reconcile's upgrade of an older
// gateway) against a protocol-level fake: the model-endpoint token is replaced only when the
// gateway took the new config; a refused patch leaves the gateway's token working and the
// version as it was. The real gateway: warm-pool.test.ts (reconcile's upgrade).

const fake = createFakeGateway();
let row: InstanceRow;

beforeAll(async () => {
  process.env.RUNTIME_PLATFORM_AI_URL = "http://platform.test/api/ai/v1";
  resetEnvCache();
  fake.use();
  const user = await agentUser("solo");
  row = await pairedInstanceAt(user.id);
});

afterAll(() => {
  closeGatewayClients();
  delete process.env.RUNTIME_PLATFORM_AI_URL;
  resetEnvCache();
});

const apiKeyInConfig = () =>
  (fake.state.config as { models?: { providers?: { platform?: { apiKey?: string } } } }).models
    ?.providers?.platform?.apiKey;

it("keeps the gateway's token when the patch is refused, and replaces it once applied", async () => {
  const old = await issueInstanceToken(row.user_id, row.id);
  const { client } = await connectPaired(row, FAKE_GATEWAY_ADDRESS);
  try {
    fake.state.staleHashes = 1; // another writer came first: refused
    await expect(applyPlatformConfig(client, row)).rejects.toThrow(/config changed/);
    expect(await authenticateInstanceToken(old)).toMatchObject({ instanceId: row.id });
    expect((await getInstance(row.id))?.platform_config_version).toBeNull();

    await applyPlatformConfig(client, row);
    const given = apiKeyInConfig();
    expect(given).toMatch(/^ait_/);
    expect(await authenticateInstanceToken(given!)).toMatchObject({ instanceId: row.id });
    expect(await authenticateInstanceToken(old)).toBeUndefined();
    expect((await getInstance(row.id))?.platform_config_version).toBe(PLATFORM_CONFIG_VERSION);
    expect(fake.state.config).toMatchObject({
      gateway: { controlUi: { enabled: true } },
      models: { providers: { platform: { baseUrl: "http://platform.test/api/ai/v1" } } },
    });
  } finally {
    client.close();
  }
});

it("turns on the plugins of the channels the user set up, and only those", async () => {
  const pluginEntries = () => (fake.state.config as { plugins?: unknown }).plugins;
  const { client } = await connectPaired(row, FAKE_GATEWAY_ADDRESS);
  try {
    await applyPlatformConfig(client, row);
    expect(pluginEntries()).toEqual({
      entries: { discord: { enabled: false }, whatsapp: { enabled: false } },
    });
    await storeChannelCredential(row.user_id, "chatapp3", { token: "linked-by-qr" });
    await applyPlatformConfig(client, row);
    expect(pluginEntries()).toEqual({
      entries: { discord: { enabled: false }, whatsapp: { enabled: true } },
    });
    expect(fake.state.config).toMatchObject({ channels: { whatsapp: { enabled: true } } });
  } finally {
    client.close();
  }
});

it("queues the agents' sync when it re-applies the config (reconcile, repair)", async () => {
  // Version 5: the agents' entries name their agent (decision 0225), so a gateway brought up to
  // date gets them too.
  const boss = await getBoss();
  const syncs = async () =>
    (await boss.findJobs("sync-agents", { data: { userId: row.user_id } })).length;
  const before = await syncs();
  await reapplyConfig(row, FAKE_GATEWAY_ADDRESS);
  expect(await syncs()).toBe(before + 1);
});
