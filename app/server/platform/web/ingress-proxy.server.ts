import type { IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { connectionSlots } from "../connection-slots.server.ts";
import { logger } from "../logger.server.ts";
import { answer, proxyHttp } from "./ingress-http.server.ts";
import { createSocketProxy } from "./ingress-socket.server.ts";
import {
  DEFAULT_INGRESS_LIMITS,
  type IngressAuthority,
  type IngressContext,
  type IngressLimits,
} from "./ingress-types.server.ts";
import { refuseUpgrade } from "./upgrade-refusal.server.ts";

// The ingress to agents' gateways: HTTP requests and WebSocket upgrades that an authority (handed
// in by the entry, which knows the areas) claims are admitted by it and proxied to the gateway's
// private address. This module only moves bytes: bodies are piped (back-pressure through pipe),
// WebSocket messages are relayed with a bounded send queue per direction, and everything has a
// size limit, a timeout and a per-agent and per-user cap on concurrent connections. One concern
// a file: ingress-types (verdicts, limits), ingress-headers (what crosses, each way),
// ingress-http and ingress-socket (the two halves).
// docs/decisions/0115-agent-ingress.md, 0200

export {
  DEFAULT_INGRESS_LIMITS,
  INGRESS_CLOSE,
  type IngressAuthority,
  type IngressLimits,
  type IngressVerdict,
} from "./ingress-types.server.ts";

export interface Ingress {
  /** Handles the request when the authority claims it; false otherwise (not touched). */
  handle(req: IncomingMessage, res: ServerResponse): boolean;
  upgrade(req: IncomingMessage, socket: Socket, head: Buffer): boolean;
  /** Open connections now (tests and metrics). */
  open(): { total: number; byKey: Map<string, number> };
}

export function createIngress(
  authority: IngressAuthority,
  overrides: Partial<IngressLimits> = {},
): Ingress {
  const limits = { ...DEFAULT_INGRESS_LIMITS, ...overrides };
  const slots = connectionSlots();

  /** Takes a slot under both caps, or undefined when one is full. */
  const acquire = (agentKey: string, userKey: string) =>
    slots.take(
      { key: `agent:${agentKey}`, cap: limits.perAgent },
      { key: `user:${userKey}`, cap: limits.perUser },
    );

  const ctx: IngressContext = { authority, limits, acquire };
  const proxyUpgrade = createSocketProxy(ctx);

  return {
    handle(req, res) {
      if (!authority.claims(req)) return false;
      proxyHttp(ctx, req, res).catch((error: unknown) => {
        logger().error({ err: error, url: req.url }, "ingress request failed");
        answer(res, 500, {}, JSON.stringify({ error: "Internal server error" }));
      });
      return true;
    },
    upgrade(req, socket, head) {
      if (!authority.claims(req)) return false;
      socket.on("error", () => socket.destroy());
      proxyUpgrade(req, socket, head).catch((error: unknown) => {
        logger().error({ err: error, url: req.url }, "ingress upgrade failed");
        refuseUpgrade(socket, 500, "Internal server error");
      });
      return true;
    },
    open: () => ({ total: slots.total(), byKey: slots.byKey() }),
  };
}
