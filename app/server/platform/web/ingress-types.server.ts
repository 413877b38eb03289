import type { IncomingMessage, OutgoingHttpHeaders } from "node:http";

// The ingress's vocabulary: what an authority decides about a request, the limits the proxy
// keeps, and what its HTTP and WebSocket halves share. docs/decisions/0115-agent-ingress.md

/** What the authority decided about one request. */
export type IngressVerdict =
  | {
      kind: "answer";
      status: number;
      headers?: OutgoingHttpHeaders;
      body?: string;
    }
  | {
      kind: "proxy";
      /** host:port of the gateway on the private network. */
      address: string;
      /** Path and query to ask the gateway for. */
      path: string;
      /** Keys of the concurrency caps: the agent's gateway and the signed-in user. */
      agentKey: string;
      userKey: string;
      /** Headers added to every answer (Set-Cookie of a rolled session, the page's CSP, …). */
      responseHeaders?: OutgoingHttpHeaders;
      /** Headers set on what reaches the gateway (lower case: they replace the visitor's). */
      upstreamHeaders?: Record<string, string>;
      /**
       * Rewrites an HTML answer before it is sent (the path form's base path); the gateway is
       * asked for it uncompressed, and a page larger than `maxPageBytes` is refused (502).
       */
      rewritePage?: (html: string) => string;
      /** Asked every `recheckMs` while a socket stays open: false closes it (access revoked). */
      stillAllowed?: () => Promise<boolean>;
      /**
       * Started when a socket is relayed: calling `revoke` closes it at once with 4401
       * "credential revoked" (the authority watches the credential); returns how to stop it.
       */
      watch?: (revoke: () => void) => () => void;
      /**
       * Rewrites a relayed socket's text messages, per direction (`up`: to the gateway);
       * undefined drops the message.
       */
      frames?: {
        up(text: string): string | undefined | Promise<string | undefined>;
        down(text: string): string | undefined | Promise<string | undefined>;
      };
      /** Called once when a relayed socket (or its attempt) ends. */
      onClose?: () => void;
    };

export interface IngressAuthority {
  /** Cheap and synchronous: is this request addressed to an agent? (No I/O for other requests.) */
  claims(req: IncomingMessage): boolean;
  admit(req: IncomingMessage, kind: "http" | "upgrade"): Promise<IngressVerdict>;
}

export interface IngressLimits {
  /** Concurrent requests and sockets to one agent's gateway, and of one user. */
  perAgent: number;
  perUser: number;
  /** A socket (HTTP or WebSocket) with no traffic for this long is closed. */
  idleMs: number;
  /** How long the gateway may take to start answering an HTTP request. */
  responseTimeoutMs: number;
  /** Largest HTTP request body and WebSocket message passed on. */
  maxBodyBytes: number;
  maxMessageBytes: number;
  /** Largest HTML page read whole to be rewritten (`rewritePage`). */
  maxPageBytes: number;
  /** Bytes a relayed WebSocket direction may queue before its reader is paused. */
  highWaterBytes: number;
  recheckMs: number;
}

export const DEFAULT_INGRESS_LIMITS: IngressLimits = {
  perAgent: 32,
  perUser: 64,
  idleMs: 5 * 60_000,
  responseTimeoutMs: 30_000,
  maxBodyBytes: 10 * 1024 * 1024,
  maxMessageBytes: 16 * 1024 * 1024,
  maxPageBytes: 2 * 1024 * 1024,
  highWaterBytes: 1024 * 1024,
  recheckMs: 30_000,
};

/** Close codes of relayed sockets the ingress itself closes (4000–4999: the application's). */
export const INGRESS_CLOSE = {
  revoked: 4403,
  credentialRevoked: 4401,
  gatewayGone: 1012,
  idle: 4408,
} as const;

/** What the HTTP and WebSocket halves share of one ingress. */
export interface IngressContext {
  authority: IngressAuthority;
  limits: IngressLimits;
  /** Takes a slot under both concurrency caps, or undefined when one is full. */
  acquire(agentKey: string, userKey: string): (() => void) | undefined;
}
