import { meter } from "../../app/server/ai/metering.server.ts";

// A web process that answers one metered call and is killed before its usage is written:
// metering-journal.test.ts holds the usage table locked so the write waits, then kill -9s it.

const [userId] = process.argv.slice(2);
void meter({
  userId: userId as string,
  instanceId: null,
  endpoint: "chat",
  provider: "openai",
  model: "openai/gpt-4o",
  promptTokens: 10,
  completionTokens: 20,
  tokensEstimated: false,
  costMicroUsd: 1234,
  billingMode: "credits",
  stream: false,
  latencyMs: 5,
  status: "ok",
  httpStatus: 200,
  error: null,
});
process.stdout.write("metered\n");
setInterval(() => {}, 60_000);
