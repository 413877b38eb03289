import type { OutgoingHttpHeaders } from "node:http";
import type { Socket } from "node:net";

// A WebSocket upgrade refused before the handshake: an HTTP status with the `{error}` body every
// other answer has, then the connection closed (the ingress's refusals, a live socket over its cap).

export function refuseUpgrade(
  socket: Socket,
  status: number,
  reason: string,
  headers: OutgoingHttpHeaders = {},
): void {
  if (socket.destroyed) return;
  const extra = Object.entries(headers)
    .flatMap(([k, v]) => (Array.isArray(v) ? v.map((x) => `${k}: ${x}`) : [`${k}: ${v}`]))
    .join("\r\n");
  const body = JSON.stringify({ error: reason });
  socket.end(
    `HTTP/1.1 ${status} ${reason.replace(/[\r\n]/g, " ")}\r\nConnection: close\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
      `${extra ? `${extra}\r\n` : ""}\r\n${body}`,
  );
}
