import { createServer } from "node:http";

// A local fake OpenAI-compatible provider for `npm run bench`: answers chat completions at once
// (JSON, or a short SSE stream ending with a usage chunk) so that what is measured is the
// platform's own overhead. HOST: loopback unless given (the stack test runs it in a container).

const created = 1_750_000_000;
const reply = "Hello! How can I help you today?";
const usage = { prompt_tokens: 12, completion_tokens: 9, total_tokens: 21 };
const completion = JSON.stringify({
  id: "chatcmpl-bench",
  object: "chat.completion",
  created,
  model: "gpt-4o-mini",
  choices: [{ index: 0, message: { role: "assistant", content: reply }, finish_reason: "stop" }],
  usage,
});
const chunk = (delta: object, finish: string | null = null) =>
  `data: ${JSON.stringify({ id: "chatcmpl-bench", object: "chat.completion.chunk", created, model: "gpt-4o-mini", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
const streamBody = [
  chunk({ role: "assistant", content: "" }),
  ...reply.split(" ").map((w, i) => chunk({ content: i ? ` ${w}` : w })),
  chunk({}, "stop"),
  `data: ${JSON.stringify({ id: "chatcmpl-bench", object: "chat.completion.chunk", created, model: "gpt-4o-mini", choices: [], usage })}\n\n`,
  "data: [DONE]\n\n",
];
const models = JSON.stringify({
  object: "list",
  data: [{ id: "gpt-4o-mini", object: "model", created, owned_by: "system" }],
});

createServer((req, res) => {
  if (req.method === "GET" && req.url?.endsWith("/models")) {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(models);
    return;
  }
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    const body = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}") as {
      stream?: boolean;
      user?: string;
      max_tokens?: number;
      max_completion_tokens?: number;
    };
    // The exact-holds burst (bench/run.ts) tags its calls: each answer uses its whole limit.
    if (body.user === "bench-burst" && !body.stream) {
      const limit = body.max_tokens ?? body.max_completion_tokens ?? 0;
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          ...JSON.parse(completion),
          usage: { prompt_tokens: 12, completion_tokens: limit, total_tokens: 12 + limit },
        }),
      );
      return;
    }
    if (!body.stream) {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(completion);
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    for (const part of streamBody) res.write(part);
    res.end();
  });
}).listen(Number(process.env.PORT), process.env.HOST ?? "127.0.0.1");
process.on("SIGTERM", () => process.exit(0));
