import { onDbClose } from "../platform/db.server.ts";
import { env } from "../platform/env.server.ts";
import { logger } from "../platform/logger.server.ts";
import { type ChannelListener, listenChannel } from "../platform/pg-channel.server.ts";

// A gateway's address changed, or its instance went (migration 0104's trigger,
// whichever process wrote it): every connection to the old one is dropped at once, so no
// token is sent to an address the engine may have handed to another container (decision 0195).
// One LISTEN per process; a handler gets the instance id, or undefined when messages may have
// been missed (drop everything).

export const GATEWAY_ENDPOINTS_CHANNEL = "gateway_endpoints";

type Handler = (instanceId: string | undefined) => void;
const handlers = new Set<Handler>();
let listener: ChannelListener | undefined;

function emit(instanceId: string | undefined) {
  for (const handler of handlers) {
    try {
      handler(instanceId);
    } catch (error) {
      logger().warn({ err: error, instanceId }, "a gateway endpoint handler failed");
    }
  }
}

function ensureListener() {
  if (listener) return;
  const url = env().DATABASE_URL;
  if (!url) return;
  const made = listenChannel(url, GATEWAY_ENDPOINTS_CHANNEL, {
    onMessage: (instanceId) => emit(instanceId),
    onReset: () => emit(undefined),
  });
  listener = made.listener;
  made.ready.catch((error: unknown) =>
    logger().warn({ err: error }, "gateway endpoint listener cannot connect yet"),
  );
  onDbClose(async () => {
    const stopping = listener;
    listener = undefined;
    await stopping?.stop();
  });
}

/** Calls `handler` on every change of a gateway's endpoint; returns the unsubscribe. */
export function onGatewayEndpointChange(handler: Handler): () => void {
  ensureListener();
  handlers.add(handler);
  return () => handlers.delete(handler);
}
