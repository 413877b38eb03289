import { z } from "zod";
import { env } from "./env.server.ts";

// Whether an error means "the database cannot be reached right now" (it restarts, fails over or
// refuses connections) rather than a bug: such a request is answered 503 and can be retried,
// instead of the 500 of an unexpected error (decision 0223).

/** The answer (503, `{error}`) while the database cannot be reached. */
export const DATABASE_UNAVAILABLE = "Database unavailable; try again shortly";

/** postgres.js's own codes for a connection that closed, ended or never opened. */
const CLIENT_CODES = new Set([
  "CONNECTION_CLOSED",
  "CONNECTION_ENDED",
  "CONNECTION_DESTROYED",
  "CONNECT_TIMEOUT",
]);

/** Socket errors: the database's only when they name its port (a gateway's would too). */
const SOCKET_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EPIPE", "EHOSTUNREACH"]);

/**
 * SQLSTATEs of a server that is going away or not accepting yet: 57P01 admin shutdown (a fast
 * stop, pg_terminate_backend), 57P02 crash shutdown, 57P03 cannot connect now (starting up),
 * 53300 too many connections; class 08 is "connection exception".
 */
const SERVER_CODES = new Set(["57P01", "57P02", "57P03", "53300"]);

// postgres.js names the port as an array (one per host of the URL), node's net errors as a number.
const port = z.union([z.number(), z.string()]);
// postgres.js gives the errors of a query the query's text (`query`): a socket error without a
// port (a `read ECONNRESET` of a server killed mid-query: the soak) is the database's then.
const coded = z.object({
  code: z.string(),
  port: z.union([port, z.array(port)]).optional(),
  query: z.string().optional(),
});

function databasePort(): string {
  const url = env().DATABASE_URL;
  if (!url) return "5432";
  try {
    return new URL(url).port || "5432";
  } catch {
    return "5432";
  }
}

export function isDatabaseUnavailable(error: unknown): boolean {
  const parsed = coded.safeParse(error);
  if (!parsed.success) return false;
  const { code } = parsed.data;
  if (CLIENT_CODES.has(code) || SERVER_CODES.has(code)) return true;
  if (/^08[0-9A-Z]{3}$/.test(code)) return true;
  const ports = [parsed.data.port ?? []].flat().map(String);
  return (
    SOCKET_CODES.has(code) && (ports.includes(databasePort()) || parsed.data.query !== undefined)
  );
}
