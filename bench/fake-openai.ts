import { createServer } from "node:http";

// A local fake OpenAI-compatible provider for `npm run bench` and `npm run soak`: answers chat
// completions at once (JSON, or a short SSE stream ending with a usage chunk) so that what is
// measured is the platform's own overhead. HOST: loopback unless given (the stack test runs it
// in a container).
// The soak tells it the usage to report: `usage=<prompt>/<completion>` in the last user
// message. `GET /__usage` lists every usage it reported ({model, prompt, completion}), so the
// soak can price them by the catalog and compare with the platform's ledger.

const created = 1_750_000_000;
const reply = "Hello! How can I help you today?";
const defaultUsage = { prompt: 12, completion: 9 };
const reported: Array<{ model: string; prompt: number; completion: number; at: number }> = [];
const usageOf = (u: { prompt: number; completion: number }) => ({
  prompt_tokens: u.prompt,
  completion_tokens: u.completion,
  total_tokens: u.prompt + u.completion,
});
const completion = (model: string, u: { prompt: number; completion: number }) =>
  JSON.stringify({
    id: "chatcmpl-bench",
    object: "chat.completion",
    created,
    model,
    choices: [{ index: 0, message: { role: "assistant", content: reply }, finish_reason: "stop" }],
    usage: usageOf(u),
  });
const chunk = (model: string, delta: object, finish: string | null = null) =>
  `data: ${JSON.stringify({ id: "chatcmpl-bench", object: "chat.completion.chunk", created, model, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
const streamBody = (model: string, u: { prompt: number; completion: number }) => [
  chunk(model, { role: "assistant", content: "" }),
  ...reply.split(" ").map((w, i) => chunk(model, { content: i ? ` ${w}` : w })),
  chunk(model, {}, "stop"),
  `data: ${JSON.stringify({ id: "chatcmpl-bench", object: "chat.completion.chunk", created, model, choices: [], usage: usageOf(u) })}\n\n`,
  "data: [DONE]\n\n",
];
const models = JSON.stringify({
  object: "list",
  data: [{ id: "gpt-4o-mini", object: "model", created, owned_by: "system" }],
});

/** The usage the last user message asks for (`usage=P/C`), else the default. */
function toldUsage(messages: unknown): { prompt: number; completion: number } | undefined {
  if (!Array.isArray(messages)) return undefined;
  const last = [...messages].reverse().find((m) => (m as { role?: string })?.role === "user");
  const text = JSON.stringify((last as { content?: unknown } | undefined)?.content ?? "");
  const match = /usage=(\d+)\/(\d+)/.exec(text);
  return match ? { prompt: Number(match[1]), completion: Number(match[2]) } : undefined;
}

createServer((req, res) => {
  if (req.method === "GET" && req.url?.endsWith("/models")) {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(models);
    return;
  }
  if (req.method === "GET" && req.url === "/__usage") {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ reported }));
    return;
  }
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    const body = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}") as {
      model?: string;
      messages?: unknown;
      stream?: boolean;
      user?: string;
      max_tokens?: number;
      max_completion_tokens?: number;
    };
    const model = body.model ?? "gpt-4o-mini";
    let u = toldUsage(body.messages) ?? defaultUsage;
    // The exact-holds burst (bench/run.ts) tags its calls: each answer uses its whole limit.
    if (body.user === "bench-burst" && !body.stream) {
      u = { prompt: 12, completion: body.max_tokens ?? body.max_completion_tokens ?? 0 };
    }
    reported.push({ model, ...u, at: Date.now() });
    if (!body.stream) {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(completion(model, u));
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    for (const part of streamBody(model, u)) res.write(part);
    res.end();
  });
}).listen(Number(process.env.PORT), process.env.HOST ?? "127.0.0.1");
process.on("SIGTERM", () => process.exit(0));
