import pino from "pino";
import { env } from "./env.server.ts";
import { currentLogContext } from "./request-context.server.ts";

// JSON lines in production (for the log pipeline), pretty on a terminal locally.
function create(): pino.Logger {
  const { NODE_ENV, LOG_LEVEL } = env();
  const pretty = NODE_ENV === "development" && process.stdout.isTTY;
  return pino({
    level: LOG_LEVEL,
    base: { pid: process.pid },
    redact: {
      paths: [
        "password",
        "*.password",
        "token",
        "*.token",
        "apiKey",
        "*.apiKey",
        "secret",
        "*.secret",
        "headers.authorization",
        "headers.cookie",
      ],
      censor: "[redacted]",
    },
    ...(pretty ? { transport: { target: "pino-pretty", options: { colorize: true } } } : {}),
  });
}

let instance: pino.Logger | undefined;

/**
 * The process's logger; inside a request (or a job a request enqueued) a child of it that puts
 * the request id on every line, made once per request and only when it logs.
 */
export function logger(): pino.Logger {
  instance ??= create();
  const context = currentLogContext();
  if (!context) return instance;
  context.log ??= instance.child(context.bindings);
  return context.log;
}
