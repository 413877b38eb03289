import {
  CLIENT_ID,
  CLIENT_MODE,
  PLATFORM,
  PROTOCOL_VERSION,
} from "../../app/server/openclaw/client.server.ts";

// Approving a device's pairing from inside the gateway's container (decision 0192). The gateway
// gives a connection from loopback that presents its token full operator scopes, so a small
// script run there with `node -e` approves the request over the control protocol: what
// `openclaw devices approve` does, without loading OpenClaw's CLI (~1.5 CPU-seconds per pairing,
// against ~0.1 for this). It reads the token and port from the gateway's own environment, so
// no secret is on its command line. No dependency: Node's global WebSocket.

const script = `
const port = process.env.OPENCLAW_GATEWAY_PORT || "18789";
const token = process.env.OPENCLAW_GATEWAY_TOKEN;
const requestId = process.argv[1];
const fail = (why) => { process.stderr.write(why + "\\n"); process.exit(1); };
if (!token) fail("OPENCLAW_GATEWAY_TOKEN is not set");
if (!requestId) fail("no request id");
setTimeout(() => fail("the gateway did not answer within 30 s"), 30000).unref();
const ws = new WebSocket("ws://127.0.0.1:" + port);
const send = (id, method, params) => ws.send(JSON.stringify({ type: "req", id, method, params }));
ws.onerror = () => fail("the gateway is not reachable on loopback port " + port);
ws.onclose = (e) => fail("the gateway closed the connection: " + e.code + " " + e.reason);
ws.onmessage = (m) => {
  const f = JSON.parse(String(m.data));
  if (f.type === "event" && f.event === "connect.challenge") {
    send("connect", "connect", {
      minProtocol: ${PROTOCOL_VERSION}, maxProtocol: ${PROTOCOL_VERSION},
      client: { id: ${JSON.stringify(CLIENT_ID)}, version: "1.0.0", platform: ${JSON.stringify(PLATFORM)}, mode: ${JSON.stringify(CLIENT_MODE)} },
      role: "operator", scopes: ["operator.admin", "operator.pairing"],
      caps: [], commands: [], permissions: {}, auth: { token },
    });
  } else if (f.type === "res" && f.id === "connect") {
    if (!f.ok) fail("connect refused: " + JSON.stringify(f.error));
    send("approve", "device.pair.approve", { requestId });
  } else if (f.type === "res" && f.id === "approve") {
    if (!f.ok) fail("approve refused: " + JSON.stringify(f.error));
    process.stdout.write("approved " + requestId + "\\n");
    process.exit(0);
  }
};
`;

/** The command that approves pairing request `requestId` from inside the gateway's container. */
export function loopbackApproveCommand(requestId: string): string[] {
  return ["node", "-e", script, requestId];
}
