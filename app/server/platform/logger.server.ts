import pino from "pino";
import { env } from "./env.server.ts";

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

export function logger(): pino.Logger {
  instance ??= create();
  return instance;
}
