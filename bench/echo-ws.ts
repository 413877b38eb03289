import { createServer } from "node:http";
import WebSocket from "ws";

// A stand-in gateway for the ingress bench: echoes every WebSocket frame, in its own process.
const server = createServer((_req, res) => res.end("ok"));
new WebSocket.Server({ server, perMessageDeflate: false }).on("connection", (ws) => {
  ws.on("message", (data: Buffer) => ws.send(data));
});
server.listen(Number(process.env.PORT), "127.0.0.1");
