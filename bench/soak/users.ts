import { randomBytes } from "node:crypto";
import type postgres from "postgres";
import { type Credential, call, ok } from "./http.ts";
import type { Recorder } from "./record.ts";

// Users as the platform's HTTP API makes them: register, sign in (session cookie), an API key;
// credits granted as an operator would (a ledger row), then an agent provisioned.

export type Role = "talker" | "small-balance" | "lifecycle" | "churn";

export interface SoakUser {
  index: number;
  role: Role;
  id: string;
  email: string;
  auth: Credential;
  key: string;
  agentId?: string;
  /** What the last accepted request asked of the agent; `unsure` also allows the previous. */
  expected: {
    state: "running" | "stopped" | "deleted";
    unsure?: "running" | "stopped" | "deleted";
  };
  /** Whether a restore ran on the agent (its messages return to the backup's). */
  restored: boolean;
}

export const MODEL = "openai/gpt-4o-mini";
const T = 30_000;

export async function makeUser(
  rec: Recorder,
  base: string,
  sql: postgres.Sql,
  index: number,
  role: Role,
  credit: number,
): Promise<SoakUser> {
  const email = `soak-${index}-${randomBytes(3).toString("hex")}@example.com`;
  const password = randomBytes(12).toString("hex");
  const reg = await call(rec, "setup", `${base}/api/register`, {
    body: { email, password, name: `Soak ${index}` },
    timeoutMs: T,
  });
  if (!ok(reg)) throw new Error(`register ${reg.outcome}: ${JSON.stringify(reg.body)}`);
  const id = String(reg.body.id);
  const res = await fetch(`${base}/api/auth/callback/credentials`, {
    method: "POST",
    headers: { "content-type": "application/json", "user-agent": "Mozilla/5.0 soak" },
    body: JSON.stringify({ email, password }),
  });
  const cookie = res.headers
    .getSetCookie()
    .map((c) => c.split(";")[0])
    .find((c) => c?.startsWith("__session="));
  if (!res.ok || !cookie) throw new Error(`sign-in ${res.status}`);
  const auth = { cookie };
  const made = await call(rec, "setup", `${base}/api/keys`, {
    body: { name: "soak" },
    auth,
    timeoutMs: T,
  });
  if (!ok(made)) throw new Error(`POST /api/keys ${made.outcome}`);
  await sql`insert into credit_ledger (id, user_id, amount_micro_usd, reason)
    values (${`led_soak_${id}`}, ${id}, ${credit}, 'soak grant')`;
  return {
    index,
    role,
    id,
    email,
    auth,
    key: String(made.body.key),
    expected: { state: "deleted" },
    restored: false,
  };
}

/** Provisions the user's agent; accepted means the platform now owes a running agent. */
export async function provision(rec: Recorder, base: string, user: SoakUser): Promise<boolean> {
  const answer = await call(rec, "provision", `${base}/api/agents/provision`, {
    body: { name: `Soak ${user.index}`, model: MODEL },
    auth: user.auth,
    timeoutMs: 120_000,
  });
  const agent = answer.body.agent as { id?: string } | undefined;
  if (ok(answer) && agent?.id) {
    user.agentId = agent.id;
    user.expected = { state: "running" };
    return true;
  }
  if (typeof answer.outcome !== "number") user.expected.unsure = "running";
  return false;
}

/** The instance's contract status (`running`, `stopped`, `starting`…), or the HTTP outcome. */
export async function instanceStatus(rec: Recorder, base: string, user: SoakUser) {
  const a = await call(rec, "status", `${base}/api/instance/${user.id}`, {
    auth: user.auth,
    timeoutMs: T,
  });
  return ok(a) ? String(a.body.status) : `http ${a.outcome}`;
}

export async function waitRunning(
  rec: Recorder,
  base: string,
  user: SoakUser,
  timeoutMs: number,
): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if ((await instanceStatus(rec, base, user)) === "running") return true;
    await new Promise((r) => setTimeout(r, 1000));
  }
  return false;
}
