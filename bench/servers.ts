import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

export interface Child {
  url: string;
  process: ChildProcess;
  stop(): Promise<void>;
}

async function waitFor(url: string, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`${url}: process exited with ${child.exitCode}`);
    const ok = await fetch(url).then(
      (r) => r.status < 500,
      () => false,
    );
    if (ok) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} did not come up within 60 s`);
}

/** Runs a Node entry as its own process (so it has a core to itself) and waits for `probe`. */
export async function startNode(
  entry: string,
  port: number,
  probe: string,
  env: Record<string, string> = {},
): Promise<Child> {
  const child = spawn(process.execPath, [entry], {
    cwd: root,
    env: {
      ...process.env,
      PORT: String(port),
      HOST: "127.0.0.1",
      LOG_LEVEL: "warn",
      NODE_ENV: "production",
      APP_URL: `http://127.0.0.1:${port}`,
      SESSION_SECRET: randomBytes(32).toString("hex"),
      SEALING_KEY: randomBytes(32).toString("hex"),
      ...env,
    },
    stdio: ["ignore", "inherit", "inherit"],
  });
  const url = `http://127.0.0.1:${port}`;
  await waitFor(`${url}${probe}`, child);
  return {
    url,
    process: child,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.kill("SIGTERM");
      }),
  };
}

/** `POST /api/agent` as a signed-in user (session cookie); throws on an error answer. */
export function agentPoster(webUrl: string, cookie: string) {
  return async (body: object) => {
    const res = await fetch(`${webUrl}/api/agent`, {
      method: "POST",
      headers: { cookie, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    const json = (await res.json()) as { reply?: string; sessionId?: string; error?: string };
    if (!res.ok) throw new Error(`POST /api/agent ${res.status}: ${json.error}`);
    return json;
  };
}
