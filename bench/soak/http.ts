import type { Outcome, Recorder } from "./record.ts";

// The soak's HTTP client: every request is timed and recorded under its kind, with the
// documented bound of that kind as its timeout (a request past it counts as hanging).

// Bot detection refuses HTTP libraries' user agents (isbot): the soak says it is a browser.
const USER_AGENT = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/140 Safari/537.36";

export interface Answer {
  outcome: Outcome;
  body: Record<string, unknown>;
  headers?: Headers;
}

export interface Credential {
  cookie?: string;
  key?: string;
}

export async function call(
  rec: Recorder,
  kind: string,
  url: string,
  init: { method?: string; body?: unknown; auth?: Credential; timeoutMs: number },
): Promise<Answer> {
  const at = Date.now();
  const headers: Record<string, string> = { "user-agent": USER_AGENT };
  if (init.body !== undefined) headers["content-type"] = "application/json";
  if (init.auth?.cookie) headers.cookie = init.auth.cookie;
  if (init.auth?.key) headers.authorization = `Bearer ${init.auth.key}`;
  try {
    const res = await fetch(url, {
      method: init.method ?? (init.body === undefined ? "GET" : "POST"),
      headers,
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
      signal: AbortSignal.timeout(init.timeoutMs),
    });
    const text = await res.text();
    let body: Record<string, unknown> = {};
    try {
      const parsed: unknown = JSON.parse(text);
      if (parsed && typeof parsed === "object") body = parsed as Record<string, unknown>;
    } catch {
      body = { text: text.slice(0, 200) };
    }
    rec.add(kind, at, res.status);
    return { outcome: res.status, body, headers: res.headers };
  } catch (error) {
    const outcome: Outcome = (error as Error).name === "TimeoutError" ? "timeout" : "network";
    rec.add(kind, at, outcome);
    return { outcome, body: { error: String((error as Error).message) } };
  }
}

export const ok = (a: Answer) => typeof a.outcome === "number" && a.outcome < 300;
