import type { AppLoadContext } from "@remix-run/node";

// Page routes run as a browser would, without a server: loaders by GET, actions by a form post.

type Who = { cookie: string };
export const context = { remoteAddress: "127.0.0.1" } as AppLoadContext;

/** Runs a loader (GET) or action (POST form) as the browser would; thrown Responses returned. */
export async function page(
  module: { loader: unknown; action?: unknown },
  path: string,
  who: Who | undefined,
  form?: Record<string, string>,
  params: Record<string, string> = {},
): Promise<{ status: number; location: string | null; body: unknown; setCookie?: string | null }> {
  const headers = new Headers();
  if (who) headers.set("cookie", who.cookie);
  let body: URLSearchParams | undefined;
  if (form) {
    body = new URLSearchParams(form);
    headers.set("origin", "http://localhost");
    headers.set("content-type", "application/x-www-form-urlencoded");
  }
  const request = new Request(new URL(path, "http://localhost"), {
    method: form ? "POST" : "GET",
    headers,
    body,
  });
  const fn = (form ? module.action : module.loader) as (args: unknown) => Promise<unknown>;
  let result: unknown;
  try {
    result = await fn({ request, params, context });
  } catch (thrown) {
    result = thrown;
  }
  if (result instanceof Response) {
    const text = await result.text();
    return {
      status: result.status,
      location: result.headers.get("location"),
      body: text,
      setCookie: result.headers.get("set-cookie"),
    };
  }
  // data(...) from an action: { type: "DataWithResponseInit", data, init }
  const wrapped = result as { type?: string; data?: unknown; init?: { status?: number } };
  if (wrapped?.type === "DataWithResponseInit") {
    return { status: wrapped.init?.status ?? 200, location: null, body: wrapped.data };
  }
  return { status: 200, location: null, body: result };
}
