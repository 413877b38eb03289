import { createServer } from "node:http";

// The baseline: bare node:http answering the same JSON body as GET /api/health, with no
// framework, no database and no routing.
const body = JSON.stringify({ status: "ok", database: "ok", queue: "ok", version: "0.1.0" });
createServer((_req, res) => {
  res.writeHead(200, {
    "Content-Type": "application/json; charset=utf-8",
    "Cache-Control": "no-store",
  });
  res.end(body);
}).listen(Number(process.env.PORT), "127.0.0.1");
process.on("SIGTERM", () => process.exit(0));
