import v8 from "node:v8";
import vm from "node:vm";
import { beforeAll, expect, it } from "vitest";
import * as completionsRoute from "../../app/routes/api.ai.v1.chat.completions.ts";
import { issueInstanceToken } from "../../app/server/ai/instance-tokens.server.ts";
import { createOpenAiFake } from "../msw/handlers/openai.ts";
import { mswServer } from "../msw/server.ts";
import { configureAi, giveCredits } from "./support.ts";

// A gateway that goes away mid-stream cuts the platform's upstream call, also after its Request
// was garbage-collected: undici unlinks a Request's signal from the one it follows once the
// Request is collected (decision 0220), so the streamed answer holds its Request until it ends.

const openai = createOpenAiFake();

beforeAll(async () => {
  mswServer.use(...openai.handlers);
  await configureAi({ OPENAI_API_KEY: "test-key" });
});

it("a client gone mid-stream aborts the upstream call, even after a GC", async () => {
  v8.setFlagsFromString("--expose-gc");
  const gc = vm.runInNewContext("gc") as () => void;
  const userId = "usr_stream_gc";
  const token = await issueInstanceToken(userId, "ins_stream_gc");
  await giveCredits(userId, 1_000_000);
  openai.state.openStream = { aborted: false };

  const client = new AbortController();
  const response = await completionsRoute.action({
    request: new Request("http://localhost/api/ai/v1/chat/completions", {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: "openai/gpt-4o-mini",
        messages: [{ role: "user", content: "Say hello" }],
        stream: true,
      }),
      signal: client.signal,
    }),
    params: {},
    context: { remoteAddress: "127.0.0.1" },
  });
  expect(response.status).toBe(200);
  // The first event arrives; the upstream stream stays open.
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  expect((await reader.read()).done).toBe(false);

  for (let i = 0; i < 3; i++) {
    gc();
    await new Promise((resolve) => setImmediate(resolve));
  }
  client.abort();
  await expect.poll(() => openai.state.openStream?.aborted, { timeout: 5_000 }).toBe(true);
  await reader.cancel().catch(() => {});
});
