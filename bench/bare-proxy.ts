import http from "node:http";

// The floor for the AI layer's added latency: the one extra Node HTTP hop and nothing else.
// Forwards every request to TARGET (the fake provider) over a keep-alive pool, the way the
// platform's provider clients do, and pipes the answer back as it arrives. No auth, no
// metering, no JSON parsing.
const target = new URL(process.env.TARGET ?? "http://127.0.0.1:1");
const agent = new http.Agent({ keepAlive: true, maxFreeSockets: 256 });

http
  .createServer((req, res) => {
    const upstream = http.request(
      {
        host: target.hostname,
        port: target.port,
        path: req.url,
        method: req.method,
        headers: { ...req.headers, host: target.host },
        agent,
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on("error", () => {
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
    req.pipe(upstream);
  })
  .listen(Number(process.env.PORT), "127.0.0.1");
process.on("SIGTERM", () => process.exit(0));
