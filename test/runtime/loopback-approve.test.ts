import { execFile } from "node:child_process";
import type { AddressInfo } from "node:net";
import { promisify } from "node:util";
import { afterEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { PROTOCOL_VERSION } from "../../app/server/openclaw/client.server.ts";
import { loopbackApproveCommand } from "../../worker/instances/loopback-approve.ts";

// The pairing approver the worker runs inside a gateway's container (decision 0192), against a
// loopback stand-in of the gateway's control socket: the frames it sends, and its refusals.
// Every real provisioning (gateway-real, the real-gateway files) pairs through it on OpenClaw.

const run = promisify(execFile);
let server: WebSocket.Server | undefined;
afterEach(() => server?.close());

interface Frame {
  type: string;
  id: string;
  method: string;
  params: Record<string, unknown>;
}

/** A control socket that challenges, then answers connect and approve as `answer` says. */
async function standIn(answer: (frame: Frame) => { ok: boolean; error?: unknown }) {
  const frames: Frame[] = [];
  server = new WebSocket.Server({ host: "127.0.0.1", port: 0 });
  server.on("connection", (socket) => {
    socket.send(
      JSON.stringify({ type: "event", event: "connect.challenge", payload: { nonce: "n" } }),
    );
    socket.on("message", (data) => {
      const frame = JSON.parse(String(data)) as Frame;
      frames.push(frame);
      socket.send(JSON.stringify({ type: "res", id: frame.id, ...answer(frame) }));
    });
  });
  await new Promise((ok) => server?.once("listening", ok));
  return { frames, port: (server.address() as AddressInfo).port };
}

/** The approver as the worker runs it, with the container's env. */
function approve(requestId: string, env: Record<string, string>) {
  const [, ...args] = loopbackApproveCommand(requestId);
  const base = { ...process.env };
  delete base.OPENCLAW_GATEWAY_TOKEN;
  delete base.OPENCLAW_GATEWAY_PORT;
  return run(process.execPath, args, { env: { ...base, ...env } }).then(
    (out) => ({ code: 0, ...out }),
    (error: { code: number; stdout: string; stderr: string }) => error,
  );
}

describe("loopback pairing approver", () => {
  it("connects with the gateway's token and approves the request", async () => {
    const { frames, port } = await standIn(() => ({ ok: true }));
    const out = await approve("req-123", {
      OPENCLAW_GATEWAY_PORT: String(port),
      OPENCLAW_GATEWAY_TOKEN: "the-token",
    });
    expect(out).toMatchObject({ code: 0, stdout: "approved req-123\n" });
    expect(frames.map((f) => f.method)).toEqual(["connect", "device.pair.approve"]);
    expect(frames[0]?.params).toMatchObject({
      minProtocol: PROTOCOL_VERSION,
      maxProtocol: PROTOCOL_VERSION,
      role: "operator",
      auth: { token: "the-token" },
    });
    expect(frames[1]?.params).toEqual({ requestId: "req-123" });
  });

  it("fails with the gateway's reason when the approval is refused", async () => {
    const { port } = await standIn((f) =>
      f.method === "connect" ? { ok: true } : { ok: false, error: { code: "NOT_FOUND" } },
    );
    const out = await approve("req-gone", {
      OPENCLAW_GATEWAY_PORT: String(port),
      OPENCLAW_GATEWAY_TOKEN: "the-token",
    });
    expect(out.code).toBe(1);
    expect(out.stderr).toContain('approve refused: {"code":"NOT_FOUND"}');
  });

  it("fails clearly without a token or a reachable gateway", async () => {
    const noToken = await approve("req-1", { OPENCLAW_GATEWAY_PORT: "1" });
    expect(noToken).toMatchObject({ code: 1, stderr: "OPENCLAW_GATEWAY_TOKEN is not set\n" });
    const { port } = await standIn(() => ({ ok: true }));
    server?.close();
    const down = await approve("req-1", {
      OPENCLAW_GATEWAY_PORT: String(port),
      OPENCLAW_GATEWAY_TOKEN: "t",
    });
    expect(down.code).toBe(1);
    expect(down.stderr).toMatch(/not reachable on loopback port|closed the connection/);
  });
});
