import type { LoaderFunctionArgs } from "@remix-run/node";
import { z } from "zod";
import { withAuditScope } from "../platform/audit.server.ts";
import { clientIp } from "../platform/client-ip.server.ts";
import { DomainError, domainErrorStatus } from "../platform/errors.server.ts";
import {
  MAX_BODY_BYTES,
  MAX_BODY_DEPTH,
  nestingDepthExceeds,
  readRawBody,
} from "../platform/http.server.ts";
import { logger } from "../platform/logger.server.ts";
import { consume } from "../platform/rate-limit.server.ts";
import { resolveScimToken } from "./tokens.server.ts";

// The SCIM 2.0 protocol edge (RFC 7644, issue 49, decision 0213): bearer token per organisation,
// answers in application/scim+json, every error in the SCIM error schema with `status` and
// `detail` (and `scimType` where RFC 7644 §3.12 names one). SCIM is not an /api route: its
// clients (identity providers) expect this shape, not `{error}`.

export const SCIM_CONTENT_TYPE = "application/scim+json";
export const ERROR_SCHEMA = "urn:ietf:params:scim:api:messages:2.0:Error";

export type ScimType =
  | "invalidFilter"
  | "tooMany"
  | "uniqueness"
  | "mutability"
  | "invalidSyntax"
  | "invalidPath"
  | "noTarget"
  | "invalidValue";

/** A SCIM error: a DomainError with the RFC's `scimType`. */
export class ScimError extends DomainError {
  readonly scimType: ScimType | undefined;
  constructor(status: number, detail: string, scimType?: ScimType) {
    super(status, detail);
    this.scimType = scimType;
  }
}

export function scimResponse(status: number, body: unknown, headers: Record<string, string> = {}) {
  return new Response(body === undefined ? null : JSON.stringify(body), {
    status,
    headers: {
      ...(body === undefined ? {} : { "content-type": `${SCIM_CONTENT_TYPE}; charset=utf-8` }),
      "cache-control": "no-store",
      ...headers,
    },
  });
}

export const scimErrorBody = (status: number, detail: string, scimType?: ScimType) => ({
  schemas: [ERROR_SCHEMA],
  status: String(status),
  ...(scimType ? { scimType } : {}),
  detail,
});

const errorResponse = (status: number, detail: string, scimType?: ScimType, extra = {}) =>
  scimResponse(status, scimErrorBody(status, detail, scimType), extra);

export interface ScimContext {
  organisationId: string;
  request: Request;
  params: Record<string, string | undefined>;
  url: URL;
  /** The parsed JSON body (methods with a body). */
  body: unknown;
}

type ScimHandler = (ctx: ScimContext) => Promise<Response>;
type Method = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

async function readJson(request: Request): Promise<unknown> {
  const type = request.headers.get("content-type") ?? "";
  const bytes = await readRawBody(request, MAX_BODY_BYTES);
  if (bytes.byteLength === 0) return undefined;
  if (type && !/json/i.test(type)) {
    throw new ScimError(415, `Content-Type must be ${SCIM_CONTENT_TYPE}`, "invalidSyntax");
  }
  const text = bytes.toString("utf8");
  // As the /api builder: a deep document costs recursion in every schema that walks it.
  if (nestingDepthExceeds(text, MAX_BODY_DEPTH)) {
    throw new ScimError(
      400,
      `JSON body is nested deeper than ${MAX_BODY_DEPTH} levels`,
      "invalidSyntax",
    );
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new ScimError(400, "Malformed JSON body", "invalidSyntax");
  }
}

/** The organisation the bearer token belongs to; 401 in SCIM form otherwise. */
async function authenticate(request: Request): Promise<string> {
  const match = /^Bearer\s+(\S+)$/i.exec(request.headers.get("authorization") ?? "");
  const organisationId = match ? await resolveScimToken(match[1]!) : undefined;
  if (!organisationId) throw new ScimError(401, "A valid SCIM bearer token is required");
  return organisationId;
}

/** Parses a SCIM request part with zod; a mismatch is 400 invalidValue naming the field. */
export function parseScim<S extends z.ZodType>(schema: S, value: unknown): z.infer<S> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  if (value === undefined) throw new ScimError(400, "Request body is required", "invalidSyntax");
  const detail = result.error.issues
    .map((i) => `${i.path.length ? i.path.join(".") : "body"}: ${i.message}`)
    .join("; ");
  throw new ScimError(400, detail, "invalidValue");
}

/** A SCIM resource route's loader and action from its methods' handlers. */
export function scimRoute(handlers: Partial<Record<Method, ScimHandler>>) {
  const handle = async ({ request, params, context }: LoaderFunctionArgs): Promise<Response> => {
    const method = (request.method === "HEAD" ? "GET" : request.method) as Method;
    const handler = handlers[method];
    if (!handler) {
      return errorResponse(405, `Method ${request.method} not allowed`, undefined, {
        allow: Object.keys(handlers).join(", "),
      });
    }
    const ip = clientIp(request, context?.remoteAddress);
    try {
      const organisationId = await authenticate(request);
      const decision = await consume("scim", `org:${organisationId}`);
      if (!decision.allowed) {
        return errorResponse(429, "Too many SCIM requests: at most 600 a minute", undefined, {
          ...decision.headers,
        });
      }
      const body = method === "GET" || method === "DELETE" ? undefined : await readJson(request);
      const url = new URL(request.url);
      // Entries name the identity provider's sync as the system acting on the organisation.
      return await withAuditScope({ ip, actor: { type: "system", userId: organisationId } }, () =>
        handler({ organisationId, request, params, url, body }),
      );
    } catch (error) {
      if (error instanceof ScimError) {
        return errorResponse(domainErrorStatus(error), error.message, error.scimType);
      }
      if (error instanceof DomainError) {
        const status = domainErrorStatus(error);
        return errorResponse(status, error.message, status === 409 ? "uniqueness" : undefined);
      }
      if (error instanceof z.ZodError) return errorResponse(400, error.message, "invalidValue");
      logger().error({ err: error, path: new URL(request.url).pathname }, "SCIM request failed");
      return errorResponse(500, "Internal server error");
    }
  };
  return { loader: handle, action: handle };
}
