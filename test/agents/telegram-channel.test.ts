import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, expect, it } from "vitest";
import * as messagesRoute from "../../app/routes/api.agents.$id.messages.ts";
import { createAgentRecord } from "../../app/server/agents/agents.server.ts";
import {
  applyChannels,
  channelSettings,
  storeChannelCredential,
} from "../../app/server/agents/channels.server.ts";
import { closeGatewayClients } from "../../app/server/agents/gateway-connection.server.ts";
import {
  ensureInstanceRecord,
  getInstance,
  type InstanceRow,
} from "../../app/server/agents/instances.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { connectPaired, provision } from "../../worker/instances.ts";
import { ChatRecorder } from "../../worker/recorder.ts";
import { DockerRuntime } from "../../worker/runtime/docker.ts";
import { setRuntime } from "../../worker/runtime/index.ts";
import { configureAi, giveCredits } from "../ai/support.ts";
import { serveAiEndpoint } from "../helpers/ai-endpoint.ts";
import { createOpenAiFake } from "../msw/handlers/openai.ts";
import { mswServer } from "../msw/server.ts";
import {
  allowDockerNetworks,
  cleanupTestObjects,
  describeDocker,
  testRun,
  waitFor,
} from "../runtime/docker-support.ts";
import { type FakeTelegram, startFakeTelegram } from "./fake-telegram.ts";
import { agentUser, asUser } from "./support.ts";

// A conversation on a chat channel (chatapp1 = Telegram), end to end with the real gateway: the
// platform writes the bot token (and the owner as the only allowed sender) into the gateway's
// channels; a person writes to the bot (a local stand-in of the Bot API, TELEGRAM_API_URL, which
// the gateway long-polls); the agent answers through the platform's model endpoint; the bot's
// reply goes out through the Bot API; the platform records both messages with platform chatapp1.

const rt = new DockerRuntime({ maxCpus: 1 });
const openai = createOpenAiFake();
const OWNER = { id: 424242, first_name: "Ada" };
let bridge: Server;
let telegram: FakeTelegram;
let recorder: ChatRecorder | undefined;
let user: { id: string; cookie: string };
let agentId: string;
let instance: InstanceRow;

describeDocker("a Telegram conversation with the real gateway", () => {
  beforeAll(async () => {
    process.env.RUNTIME_DEPLOYMENT = testRun;
    process.env.RUNTIME_NETWORK = `agent-test-${testRun}`;
    mswServer.use(...openai.handlers);
    await configureAi({ OPENAI_API_KEY: "test-key" });
    setRuntime(rt);
    allowDockerNetworks();
    const { gatewayIp } = await rt.ensureNetwork(process.env.RUNTIME_NETWORK, {
      "agent-platform.deployment": testRun,
    });
    bridge = await serveAiEndpoint();
    telegram = await startFakeTelegram();
    process.env.PORT = String((bridge.address() as AddressInfo).port);
    process.env.TELEGRAM_API_URL = `http://${gatewayIp}:${telegram.port}`;
    resetEnvCache();

    user = await agentUser("solo");
    await giveCredits(user.id, 5_000_000);
    agentId = (await createAgentRecord(user.id, { name: "Bot", model: "openai/gpt-4o-mini" })).id;
    const row = await ensureInstanceRecord(user.id, { model: "openai/gpt-4o-mini" });
    await provision(row.id);
    instance = (await getInstance(row.id)) as InstanceRow;
  }, 300_000);

  afterAll(async () => {
    recorder?.stop();
    closeGatewayClients();
    telegram?.close();
    bridge?.close();
    setRuntime(undefined);
    delete process.env.TELEGRAM_API_URL;
    resetEnvCache();
    await cleanupTestObjects(rt);
  });

  it("answers a Telegram message and records both sides as chatapp1", async () => {
    await storeChannelCredential(user.id, "chatapp1", {
      token: telegram.token,
      details: { userId: String(OWNER.id) },
    });
    const { client } = await connectPaired(instance, instance.gateway_address as string);
    try {
      await applyChannels(client, await channelSettings(user.id));
    } finally {
      client.close();
    }
    // The channel starts: it checks the token and begins long polling.
    await waitFor(async () => telegram.calls.includes("getUpdates"), {
      timeoutMs: 120_000,
      what: "the gateway polling the Bot API",
    });

    telegram.userWrites("Hello from Telegram", OWNER);
    const answer = await waitFor(
      async () =>
        telegram.sent.find(
          (m) => m.chatId === String(OWNER.id) && m.text.includes(openai.state.reply),
        ),
      { timeoutMs: 120_000, intervalMs: 500, what: "the bot's reply" },
    ).catch((error) => {
      process.stdout.write(`telegram calls ${JSON.stringify(telegram.calls)}\n`);
      process.stdout.write(`telegram sent ${JSON.stringify(telegram.sent)}\n`);
      throw error;
    });
    expect(answer.text).toContain(openai.state.reply);

    recorder = new ChatRecorder();
    const messages = await waitFor(
      async () => {
        await recorder!.refresh();
        const res = await asUser(user, messagesRoute, `/api/agents/${agentId}/messages`, {
          params: { id: agentId },
        });
        const list = res.json.messages as Array<{
          sender: string;
          content: string;
          platform: string;
        }>;
        const mine = list.filter((m) => m.platform === "chatapp1");
        return mine.some((m) => m.sender === "agent") ? mine : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 1_000, what: "the recorded Telegram conversation" },
    );
    expect(messages.find((m) => m.sender === "user")?.content).toContain("Hello from Telegram");
    expect(messages.find((m) => m.sender === "agent")?.content).toContain(openai.state.reply);
  }, 300_000);
});
