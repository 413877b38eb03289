import type { AppLoadContext } from "@remix-run/node";

// Calling the operator console's pages as a browser would: loaders with GET, actions with a
// form POST; a thrown Response (redirect, 403) is the answer.

type PageFn = (args: {
  request: Request;
  params: Record<string, string | undefined>;
  context: AppLoadContext;
}) => Promise<unknown>;

export interface PageAnswer {
  status: number;
  location: string | null;
  body: unknown;
}

async function answerOf(run: () => Promise<unknown>): Promise<PageAnswer> {
  let result: unknown;
  try {
    result = await run();
  } catch (thrown) {
    if (!(thrown instanceof Response)) throw thrown;
    result = thrown;
  }
  if (result instanceof Response) {
    return {
      status: result.status,
      location: result.headers.get("location"),
      body: await result.text(),
    };
  }
  // data(...) from remix: { type: "DataWithResponseInit", data, init }
  if (result && typeof result === "object" && "init" in result && "data" in result) {
    const { data, init } = result as { data: unknown; init?: { status?: number } };
    return { status: init?.status ?? 200, location: null, body: data };
  }
  return { status: 200, location: null, body: result };
}

export function getPage(
  loader: PageFn,
  path: string,
  cookie?: string,
  params: Record<string, string> = {},
): Promise<PageAnswer> {
  const headers = new Headers(cookie ? { cookie } : {});
  const request = new Request(new URL(path, "http://localhost"), { headers });
  return answerOf(() => loader({ request, params, context: { remoteAddress: "198.51.100.7" } }));
}

export function postPage(
  action: PageFn,
  path: string,
  fields: Record<string, string>,
  cookie?: string,
  params: Record<string, string> = {},
): Promise<PageAnswer> {
  const headers = new Headers({ "content-type": "application/x-www-form-urlencoded" });
  if (cookie) headers.set("cookie", cookie);
  const request = new Request(new URL(path, "http://localhost"), {
    method: "POST",
    headers,
    body: new URLSearchParams(fields).toString(),
  });
  return answerOf(() => action({ request, params, context: { remoteAddress: "198.51.100.7" } }));
}
