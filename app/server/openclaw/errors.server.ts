// The gateway client's failures: a refused request (the gateway's own error) and a gateway that
// does not answer. openclaw/connections.server.ts maps both to the API's 502.

/** The error of a `res` with ok:false, as the gateway sends it. */
export interface GatewayErrorShape {
  code?: string;
  message?: string;
  details?: unknown;
  /** Set by the gateway when trying again can succeed (e.g. "gateway starting; retry shortly"). */
  retryable?: boolean;
  retryAfterMs?: number;
}

/** A `res` with ok:false (error.code, error.details from the gateway). */
export class GatewayRequestError extends Error {
  readonly code: string;
  readonly details: Record<string, unknown> | undefined;
  /** When the gateway says to try again, after how long (else undefined). */
  readonly retryAfterMs: number | undefined;
  constructor(method: string, error: GatewayErrorShape) {
    const details = (error.details ?? {}) as Record<string, unknown>;
    const hint = ["reason", "requestId", "code"]
      .filter((k) => typeof details[k] === "string")
      .map((k) => `${k}=${details[k]}`)
      .join(" ");
    super(
      `${method}: ${error.code ?? "ERROR"} ${error.message ?? ""}${hint ? ` (${hint})` : ""}`.trim(),
    );
    this.name = "GatewayRequestError";
    this.code = error.code ?? "ERROR";
    this.details = (error.details ?? undefined) as Record<string, unknown> | undefined;
    this.retryAfterMs =
      error.retryable === true
        ? typeof error.retryAfterMs === "number" && error.retryAfterMs >= 0
          ? error.retryAfterMs
          : 500
        : undefined;
  }
}

/** The gateway does not answer (socket closed, connect or request timeout). Maps to 502. */
export class GatewayUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "GatewayUnavailableError";
  }
}

/**
 * The socket or its handshake failed: no request of the caller's was sent, so sending it again
 * on a new connection cannot do anything twice. A gateway restarting in place refuses for a
 * few seconds.
 */
export class GatewayConnectError extends GatewayUnavailableError {
  constructor(message: string) {
    super(message);
    this.name = "GatewayConnectError";
  }
}
