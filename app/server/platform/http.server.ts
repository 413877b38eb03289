import type { ActionFunctionArgs, LoaderFunctionArgs } from "@remix-run/node";
import type { z } from "zod";
import { addressKey } from "./address-key.server.ts";
import { type AuditActor, withAuditScope } from "./audit.server.ts";
import { clientIp } from "./client-ip.server.ts";
import { DATABASE_UNAVAILABLE, isDatabaseUnavailable } from "./db-unavailable.server.ts";
import { DomainError, domainErrorStatus } from "./errors.server.ts";
import { logger } from "./logger.server.ts";
import { consume, type RateLimitScope, rateLimitScopes } from "./rate-limit.server.ts";
import { currentRequestId, requestIdFor } from "./request-context.server.ts";
import { preReadBody, withRawBody } from "./web/node-http.server.ts";
import { tooLargeCap, tooLargeMessage } from "./web/request-body.server.ts";

// The one way to write an /api route: declare each method's auth, rate-limit scope and zod
// schemas; the builder parses, answers bad input with 400 {error}, maps DomainErrors to their
// status, answers a database that cannot be reached with 503 (the client may retry) and hides
// everything unexpected behind 500 {error: "Internal server error"}.
// The platform knows no credential: `createApiBuilder` takes the app's authorizer, and routes
// use the bound builder of app/server/api.server.ts.

/** The body cap of every route and page action that declares none (docs/decisions/0197). */
export const MAX_BODY_BYTES = 1024 * 1024;
/** Deepest nesting of arrays and objects a JSON body may have (docs/decisions/0095). */
export const MAX_BODY_DEPTH = 64;

export type Method = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

/** What the builder needs of a caller: the user id keys per-user rate limits; a rolled cookie is sent back. */
export interface Caller {
  user: { id: string };
  setCookie?: string;
  /** Who the audit log names for what the handler records (the user, or their API key). */
  auditActor?: AuditActor;
}

/** Auth modes, each mapped to what a handler under it gets as `auth` (undefined: anonymous). */
export type AuthModes<A> = { [M in keyof A]: Caller | undefined };

/** Reads and checks a request's credential under `mode`; throws (a DomainError) to refuse. */
export type Authorizer<A extends AuthModes<A>> = (
  request: Request,
  mode: keyof A & string,
  permission: string | undefined,
) => Promise<A[keyof A & string]>;

declare module "@remix-run/server-runtime" {
  interface AppLoadContext {
    /** The TCP peer of the request (set by the server entry). */
    remoteAddress?: string;
    /** The server build, for routes that describe the app (OpenAPI). */
    build?: unknown;
  }
}

type Schema = z.ZodType;
type Infer<S> = S extends z.ZodType ? z.infer<S> : undefined;

export interface HandlerContext<P, Q, B, A> {
  request: Request;
  /** Who is calling, as the endpoint's auth mode gives it (app/server/api.server.ts). */
  auth: A;
  params: P;
  query: Q;
  body: B;
  requestId: string;
  ip: string;
  context: LoaderFunctionArgs["context"];
  /** performance.now() when the builder took the request (for `x-overhead-ms`). */
  startedAt: number;
}

export interface EndpointSpec<
  PS extends Schema | undefined,
  QS extends Schema | undefined,
  BS extends Schema | undefined,
  A extends AuthModes<A>,
  M extends keyof A & string,
> {
  summary: string;
  description?: string;
  auth: M;
  /**
   * What the endpoint does in the app's terms, for an authorizer that lets people act for
   * another owner (an organisation member's role must allow it); an endpoint without one acts
   * only for the caller themselves.
   */
  permission?: string;
  rateLimit?: RateLimitScope;
  params?: PS;
  query?: QS;
  body?: BS;
  /** Status of a plain-object result (default 200). */
  status?: number;
  /**
   * Largest request body this endpoint takes, in bytes (default MAX_BODY_BYTES); the web server
   * answers a larger one 413 while it streams, before the handler reads it. A function is read
   * per request (a cap from the environment).
   */
  maxBodyBytes?: number | (() => number);
  /**
   * Every answer carries the platform's own time in `x-overhead-ms`: the handler sets it where
   * it knows better (time spent waiting on a provider is not the platform's); otherwise, errors
   * included, the builder stamps the time since it took the request.
   */
  overheadHeader?: boolean;
  // A method signature (bivariant), so any endpoint fits the route table's AnyEndpoint.
  handler(ctx: HandlerContext<Infer<PS>, Infer<QS>, Infer<BS>, A[M]>): Promise<unknown> | unknown;
}

// biome-ignore lint/suspicious/noExplicitAny: the schemas and auth of each endpoint are checked where it is declared
export type AnyEndpoint = EndpointSpec<any, any, any, any, string>;

export type ApiRoute = Partial<Record<Method, AnyEndpoint>>;

/** An endpoint under one app's auth modes. */
// biome-ignore lint/suspicious/noExplicitAny: the schemas of each endpoint are checked where it is declared
type EndpointOf<A extends AuthModes<A>> = EndpointSpec<any, any, any, A, keyof A & string>;

/** A route's methods under one app's auth modes. */
type RouteOf<A extends AuthModes<A>> = Partial<Record<Method, EndpointOf<A>>>;

/** Marker the OpenAPI generator and the server's fast path look for. */
export const API_ROUTE = Symbol.for("agent-platform.api-route");
/** The same handler for the server entry's fast path: its JSON answers come as `PlainAnswer`s. */
export const API_ANSWER = Symbol.for("agent-platform.api-answer");

/**
 * A JSON answer the builder made itself (a handler's plain result, every refusal), which the
 * server entry writes to the socket as it is: no Fetch Response, Headers or body stream is built
 * for it (docs/decisions/0150). Loaders called through Remix still get a Response.
 */
export interface PlainAnswer {
  readonly plain: true;
  status: number;
  headers: Record<string, string>;
  body: string;
  setCookie?: string;
}

export type Answer = Response | PlainAnswer;

export interface ApiHandler {
  (args: LoaderFunctionArgs | ActionFunctionArgs): Promise<Response>;
  [API_ROUTE]: ApiRoute;
  [API_ANSWER]: (args: LoaderFunctionArgs | ActionFunctionArgs) => Promise<Answer>;
}

export function json(body: unknown, init: ResponseInit = {}): Response {
  return jsonText(JSON.stringify(body), init);
}

/** A JSON response from already serialised JSON (e.g. a provider's answer passed through). */
export function jsonText(text: string, init: ResponseInit = {}): Response {
  // The headers are set on the Response's own list: one Headers object per response, not two.
  const response = new Response(text, { status: init.status, statusText: init.statusText });
  const headers = response.headers;
  const given = init.headers;
  if (given instanceof Headers || Array.isArray(given)) {
    for (const [key, value] of new Headers(given)) headers.append(key, value);
  } else if (given) {
    for (const [key, value] of Object.entries(given)) headers.append(key, value);
  }
  headers.set("Content-Type", "application/json; charset=utf-8");
  if (!headers.has("Cache-Control")) headers.set("Cache-Control", "no-store");
  return withRawBody(response, text);
}

export const errorResponse = (status: number, error: string, extra?: Record<string, unknown>) =>
  json({ error, ...extra }, { status });

const plainJson = (status: number, body: unknown): PlainAnswer => ({
  plain: true,
  status,
  headers: { "content-type": "application/json; charset=utf-8", "cache-control": "no-store" },
  body: JSON.stringify(body),
});

const statusAnswers = new WeakSet<PlainAnswer>();

/**
 * A JSON answer with its own status from a handler (whose plain result is sent with the
 * endpoint's one status): written to the socket as a plain answer, like a handler's result.
 */
export function jsonWithStatus(status: number, body: unknown): PlainAnswer {
  const answer = plainJson(status, body);
  statusAnswers.add(answer);
  return answer;
}

const plainError = (status: number, error: string, extra?: Record<string, unknown>) =>
  plainJson(status, { error, ...extra });

/** The Response of a plain answer, for callers that need one (Remix, tests). */
export function toResponse(answer: Answer): Response {
  if (answer instanceof Response) return answer;
  const response = jsonText(answer.body, { status: answer.status, headers: answer.headers });
  if (answer.setCookie) response.headers.append("Set-Cookie", answer.setCookie);
  return response;
}

function describeZodError(error: z.ZodError, where: string): string {
  return error.issues
    .map((i) => {
      const field = i.path.length ? i.path.join(".") : where;
      return `${field}: ${i.message}`;
    })
    .join("; ");
}

class BadRequest extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

/** The body cap of `route`'s endpoint for `method` (the web server applies it). */
export function bodyCapOf(route: ApiRoute, method: string | undefined): number {
  return capOf(route[(method === "HEAD" ? "GET" : method) as Method]);
}

function capOf(spec: AnyEndpoint | undefined): number {
  const cap = spec?.maxBodyBytes;
  return cap === undefined ? MAX_BODY_BYTES : typeof cap === "number" ? cap : cap();
}

async function readStream(body: ReadableStream<Uint8Array>, cap: number): Promise<Buffer> {
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > cap) {
      await reader.cancel();
      throw new BadRequest(413, tooLargeMessage(cap));
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks);
}

/**
 * The request body's exact bytes, at most `cap` of them (413 past it), for handlers that need
 * the raw body (a signature over it). The web server caps the stream already; this holds when a
 * route is called any other way.
 */
export async function readRawBody(request: Request, cap = MAX_BODY_BYTES): Promise<Buffer> {
  const declared = Number(request.headers.get("content-length") ?? "0");
  if (declared > cap) throw new BadRequest(413, tooLargeMessage(cap));
  if (!request.body) return Buffer.alloc(0);
  // The server entry may have read it already (node-http.server.ts); else read the stream.
  return preReadBody(request) ?? (await readStream(request.body, cap));
}

async function readBody(request: Request, cap: number): Promise<unknown> {
  const bytes = await readRawBody(request, cap);
  if (bytes.byteLength === 0) return undefined;
  const text = bytes.toString("utf8");
  const type = request.headers.get("content-type") ?? "";
  if (type.includes("application/x-www-form-urlencoded")) {
    return Object.fromEntries(new URLSearchParams(text));
  }
  if (type && !type.includes("json")) {
    throw new BadRequest(415, "Content-Type must be application/json");
  }
  if (nestingDepthExceeds(text, MAX_BODY_DEPTH)) {
    throw new BadRequest(400, `JSON body is nested deeper than ${MAX_BODY_DEPTH} levels`);
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new BadRequest(400, "Malformed JSON body");
  }
}

/**
 * Whether JSON text nests arrays/objects deeper than `max`, checked before parsing: a deep
 * document costs recursion in every schema and serialiser that walks it. One pass over the
 * characters, skipping strings; malformed text is left to JSON.parse.
 */
export function nestingDepthExceeds(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92 /* \\ */) i++;
      else if (c === 34 /* " */) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 123 /* { */ || c === 91 /* [ */) {
      if (++depth > max) return true;
    } else if (c === 125 /* } */ || c === 93 /* ] */) depth--;
  }
  return false;
}

function parse<S extends Schema | undefined>(schema: S, value: unknown, where: string): Infer<S> {
  if (!schema) return undefined as Infer<S>;
  const result = schema.safeParse(value);
  if (!result.success) {
    if (value === undefined && where === "body")
      throw new BadRequest(400, "Request body is required");
    throw new BadRequest(400, describeZodError(result.error, where));
  }
  return result.data as Infer<S>;
}

/** The request's id: the server's (request-context.server.ts), or one of its own when called directly. */
function requestIdOf(request: Request, remoteAddress: string | undefined): string {
  return currentRequestId() ?? requestIdFor(request.headers.get("x-request-id"), remoteAddress);
}

/** Adds `headers` the answer does not set itself (a plain answer's own are lower-case). */
function withHeaders<T extends Answer>(
  answer: T,
  headers: Record<string, string>,
  setCookie?: string,
): T {
  if (answer instanceof Response) {
    for (const k in headers) {
      if (!answer.headers.has(k)) answer.headers.set(k, headers[k]!);
    }
    if (setCookie) answer.headers.append("Set-Cookie", setCookie);
    return answer;
  }
  const own = answer.headers;
  for (const k in headers) own[k.toLowerCase()] ??= headers[k]!;
  if (setCookie) answer.setCookie = setCookie;
  return answer;
}

async function run<A extends AuthModes<A>>(
  authorize: Authorizer<A>,
  route: RouteOf<A>,
  args: LoaderFunctionArgs,
): Promise<Answer> {
  const startedAt = performance.now();
  const result = await answer(authorize, route, args, startedAt);
  const method = (args.request.method === "HEAD" ? "GET" : args.request.method) as Method;
  if (route[method]?.overheadHeader) {
    if (result instanceof Response) {
      if (!result.headers.has(OVERHEAD_HEADER)) {
        result.headers.set(OVERHEAD_HEADER, overheadMs(performance.now() - startedAt));
      }
    } else {
      result.headers[OVERHEAD_HEADER] ??= overheadMs(performance.now() - startedAt);
    }
  }
  return result;
}

export const OVERHEAD_HEADER = "x-overhead-ms";
/** The `x-overhead-ms` value: milliseconds with two decimals. */
export const overheadMs = (ms: number) => Math.max(0, ms).toFixed(2);

async function answer<A extends AuthModes<A>>(
  authorize: Authorizer<A>,
  route: RouteOf<A>,
  { request, params, context }: LoaderFunctionArgs,
  startedAt: number,
): Promise<Answer> {
  const requestId = requestIdOf(request, context?.remoteAddress);
  const method = (request.method === "HEAD" ? "GET" : request.method) as Method;
  const spec = route[method];
  let extraHeaders: Record<string, string> = { "X-Request-Id": requestId };
  if (!spec) {
    const allow = Object.keys(route).join(", ");
    return withHeaders(plainError(405, `Method ${request.method} not allowed`), {
      ...extraHeaders,
      Allow: allow,
    });
  }
  const ip = clientIp(request, context?.remoteAddress);
  let caller: Caller | undefined;
  try {
    const auth = await authorize(request, spec.auth, spec.permission);
    caller = auth;
    if (spec.rateLimit) {
      // user-or-ip scopes count per user once the caller is known, per client address (an
      // IPv6 client by its /64) otherwise.
      const scope = rateLimitScopes[spec.rateLimit];
      const key = scope.key === "user-or-ip" && caller ? `user:${caller.user.id}` : addressKey(ip);
      const decision = await consume(spec.rateLimit, key);
      extraHeaders = { ...extraHeaders, ...decision.headers };
      if (!decision.allowed) {
        const { points, duration } = scope;
        return withHeaders(
          plainError(429, `Too many requests: limit is ${points} per ${duration} seconds`),
          extraHeaders,
        );
      }
    }
    const parsedParams = parse(spec.params, params, "params");
    // The URL is parsed only for an endpoint that reads a query.
    const query = spec.query
      ? parse(spec.query, Object.fromEntries(new URL(request.url).searchParams), "query")
      : undefined;
    const body = spec.body
      ? parse(spec.body, await readBody(request, capOf(spec)), "body")
      : undefined;
    const actor = caller?.auditActor;
    const result = await withAuditScope({ ip, ...(actor ? { actor } : {}) }, () =>
      spec.handler({
        request,
        params: parsedParams,
        query,
        body,
        requestId,
        ip,
        context,
        auth,
        startedAt,
      }),
    );
    const response =
      result instanceof Response || statusAnswers.has(result as PlainAnswer)
        ? (result as Answer)
        : plainJson(spec.status ?? 200, result);
    return withHeaders(response, extraHeaders, caller?.setCookie);
  } catch (error) {
    if (error instanceof Response) return withHeaders(error, extraHeaders, caller?.setCookie);
    if (error instanceof BadRequest) {
      return withHeaders(plainError(error.status, error.message), extraHeaders);
    }
    // The web server cut the body off at its cap and has answered 413 already.
    const cap = tooLargeCap(error);
    if (cap !== undefined) return withHeaders(plainError(413, tooLargeMessage(cap)), extraHeaders);
    if (error instanceof DomainError) {
      return withHeaders(plainError(domainErrorStatus(error), error.message, error.extra), {
        ...extraHeaders,
        ...error.headers,
      });
    }
    const where = { requestId, method: request.method, path: new URL(request.url).pathname };
    // PostgreSQL restarting, failing over or refusing connections: not a bug (decision 0223).
    if (isDatabaseUnavailable(error)) {
      logger().warn({ err: error, ...where }, "database unavailable during an API request");
      return withHeaders(plainError(503, DATABASE_UNAVAILABLE), {
        ...extraHeaders,
        "Retry-After": "5",
      });
    }
    logger().error({ err: error, ...where }, "unhandled error in API route");
    return withHeaders(plainError(500, "Internal server error"), extraHeaders);
  }
}

/** The builder with the app's authorizer bound in (app/server/api.server.ts makes the one). */
export function createApiBuilder<A extends AuthModes<A>>(authorize: Authorizer<A>) {
  return {
    /** One method of a route: its auth mode (`keyof A`), rate limit, schemas and handler. */
    endpoint<
      PS extends Schema | undefined = undefined,
      QS extends Schema | undefined = undefined,
      BS extends Schema | undefined = undefined,
      M extends keyof A & string = keyof A & string,
    >(spec: EndpointSpec<PS, QS, BS, A, M>): EndpointSpec<PS, QS, BS, A, M> {
      return spec;
    },
    /**
     * Builds a resource route's `loader` (GET, HEAD) and `action` (every other method) from its
     * endpoints. Usage: `export const { loader, action } = apiRoute({ GET: endpoint({...}) });`
     */
    apiRoute(route: RouteOf<A>): { loader: ApiHandler; action: ApiHandler } {
      const handler = Object.assign(
        async (args: LoaderFunctionArgs) => toResponse(await run(authorize, route, args)),
        {
          [API_ROUTE]: route,
          [API_ANSWER]: (args: LoaderFunctionArgs) => run(authorize, route, args),
        },
      ) as ApiHandler;
      return { loader: handler, action: handler };
    },
  };
}
