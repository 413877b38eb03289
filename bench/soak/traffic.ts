import { type Answer, call, ok } from "./http.ts";
import { type Recorder, stamp } from "./record.ts";
import { chatHttp, LiveSocket } from "./turns.ts";
import { instanceStatus, MODEL, provision, type SoakUser, waitRunning } from "./users.ts";

// The traffic: one loop per user, by its role, until `until`. Talkers chat over HTTP and the
// socket (a think time between rounds) and call the AI layer by API key (with and without max_tokens, and once in a while a
// call whose reported usage exceeds its max_tokens); small balances do the same until their
// credit runs out; the lifecycle user changes its config, takes backups and restores them,
// stops, starts and restarts (following each with the progress stream, SSE) and idles long
// enough to be put to sleep; the churn user provisions and deletes its agent.

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
/**
 * A chatting user's pause between rounds, ±50 % so the users do not fall into step
 * (SOAK_THINK_SECONDS, default 30). Back to back (0.5–2 s, the runs of decision 0238) fourteen
 * users offered a 2-core host several times the ~0.3 turns a second it served, and the run
 * measured overload instead of faults. 0 drives them back to back again.
 */
const THINK_MS = Number(process.env.SOAK_THINK_SECONDS ?? 30) * 1000;
const think = () => pause(THINK_MS > 0 ? THINK_MS * (0.5 + Math.random()) : 500);
const T = 30_000;
const LIFECYCLE_T = 90_000; // INSTANCE_ACTION_TIMEOUT_MS (60 s) plus the queue

export interface Traffic {
  base: string;
  rec: Recorder;
  until: number;
  log: (line: string) => void;
}

function aiCall(t: Traffic, user: SoakUser, kind: string, usage: string, maxTokens?: number) {
  return call(t.rec, kind, `${t.base}/api/ai/chat`, {
    body: {
      model: MODEL,
      messages: [{ role: "user", content: `soak call usage=${usage}` }],
      ...(maxTokens ? { max_tokens: maxTokens } : {}),
    },
    auth: { key: user.key },
    timeoutMs: 60_000,
  });
}

/** Follows the agent's progress stream (SSE) to its `done`; records it as `sse`. */
async function followProgress(t: Traffic, user: SoakUser): Promise<void> {
  if (!user.agentId) return;
  const at = Date.now();
  try {
    const res = await fetch(`${t.base}/api/agents/${user.agentId}/events`, {
      headers: { cookie: user.auth.cookie ?? "", "user-agent": "Mozilla/5.0 soak" },
      signal: AbortSignal.timeout(LIFECYCLE_T),
    });
    const text = await res.text(); // the stream ends after `done`
    t.rec.add("sse", at, res.ok && !/event: ?done/.test(text) ? 599 : res.status);
  } catch (error) {
    t.rec.add("sse", at, (error as Error).name === "TimeoutError" ? "timeout" : "network");
  }
}

async function lifecycle(t: Traffic, user: SoakUser, action: "start" | "stop" | "restart") {
  const wanted = action === "stop" ? "stopped" : "running";
  const sse = followProgress(t, user);
  const a = await call(t.rec, action, `${t.base}/api/instance/${user.id}/${action}`, {
    body: {},
    auth: user.auth,
    timeoutMs: LIFECYCLE_T,
  });
  if (ok(a)) user.expected = { state: wanted };
  // A 5xx is "asked, not done yet": the action records the desired state before it acts, and
  // reconcile heals towards it once the engine or gateway is back (worker/instances/actions.ts).
  else if (typeof a.outcome !== "number" || a.outcome >= 500) user.expected.unsure = wanted;
  await sse;
  return a;
}

async function talker(t: Traffic, user: SoakUser) {
  const socket = new LiveSocket(t.base, user);
  for (let i = 0; Date.now() < t.until; i++) {
    await chatHttp(t.rec, t.base, user);
    await socket.chat(t.rec);
    await aiCall(t, user, "ai-key-max", "40/30", 64);
    await aiCall(t, user, "ai-key", "40/30");
    // The provider reports more than the call's bound: charged up to the hold, the rest
    // counted as uncollected (decision 0206); the ledger check includes it.
    if (i % 3 === 0) await aiCall(t, user, "ai-key-max", "40/500", 16);
    await think();
  }
  socket.close();
}

async function smallBalance(t: Traffic, user: SoakUser) {
  const socket = new LiveSocket(t.base, user);
  while (Date.now() < t.until) {
    await chatHttp(t.rec, t.base, user, "2000/1000");
    await aiCall(t, user, "ai-key-max", "3000/2000", 2000);
    await socket.chat(t.rec, "2000/1000");
    await think();
  }
  socket.close();
}

async function lifecycleUser(t: Traffic, user: SoakUser) {
  let round = 0;
  const steps: Array<() => Promise<unknown>> = [
    () =>
      call(t.rec, "config", `${t.base}/api/agents/${user.agentId}/config`, {
        method: "PUT",
        body: { soakRound: round },
        auth: user.auth,
        timeoutMs: T,
      }),
    () => chatHttp(t.rec, t.base, user),
    () =>
      call(t.rec, "backup", `${t.base}/api/agents/${user.agentId}/backups`, {
        body: {},
        auth: user.auth,
        timeoutMs: LIFECYCLE_T,
      }),
    () => skill(t, user, "install"),
    () => lifecycle(t, user, "stop"),
    () => chatHttp(t.rec, t.base, user), // a stopped agent: refused or woken, never lost
    () => lifecycle(t, user, "start"),
    () => chatHttp(t.rec, t.base, user),
    () => restoreLatest(t, user),
    () => skill(t, user, "remove"),
    () => lifecycle(t, user, "restart"),
    async () => {
      // Idle past SLEEP_IDLE_SECONDS: the agent is put to sleep; the next chat wakes it.
      const until = Math.min(t.until, Date.now() + 60_000);
      while (Date.now() < until) {
        await pause(5000);
        await instanceStatus(t.rec, t.base, user);
      }
    },
  ];
  while (Date.now() < t.until) {
    await steps[round % steps.length]?.();
    round++;
    await pause(1000);
  }
}

/** A skill the platform ships, installed on the agent (written through its gateway) or removed. */
function skill(t: Traffic, user: SoakUser, action: "install" | "remove") {
  return call(t.rec, `skill-${action}`, `${t.base}/api/skills`, {
    body: { action, name: "unit-converter", agentId: user.agentId },
    auth: user.auth,
    timeoutMs: T,
  });
}

async function restoreLatest(t: Traffic, user: SoakUser): Promise<Answer | undefined> {
  const list = await call(t.rec, "backup-list", `${t.base}/api/agents/${user.agentId}/backups`, {
    auth: user.auth,
    timeoutMs: T,
  });
  const backups = (list.body.backups ?? []) as Array<{ id: string; status: string }>;
  const ready = backups.find((b) => b.status === "ready");
  if (!ready) return undefined;
  const url = `${t.base}/api/agents/${user.agentId}/backups/${ready.id}/restore`;
  const a = await call(t.rec, "restore", url, { body: {}, auth: user.auth, timeoutMs: 300_000 });
  if (ok(a) || typeof a.outcome !== "number") user.restored = true;
  // A restore leaves the agent running (its gateway restarted on the restored state).
  if (ok(a)) user.expected = { state: "running" };
  return a;
}

async function churn(t: Traffic, user: SoakUser) {
  while (Date.now() < t.until) {
    if (!user.agentId) {
      if (await provision(t.rec, t.base, user)) {
        t.log(`${stamp(t.rec)} churn: provisioned ${user.agentId}`);
        await waitRunning(t.rec, t.base, user, 180_000);
        await chatHttp(t.rec, t.base, user);
      }
    } else {
      const a = await call(t.rec, "delete", `${t.base}/api/agents/${user.agentId}`, {
        method: "DELETE",
        auth: user.auth,
        timeoutMs: T,
      });
      if (ok(a)) {
        t.log(`${stamp(t.rec)} churn: deleted ${user.agentId}`);
        user.agentId = undefined;
        user.expected = { state: "deleted" };
      } else if (typeof a.outcome !== "number") user.expected.unsure = "deleted";
    }
    await pause(5000);
  }
}

export function drive(t: Traffic, users: SoakUser[]): Promise<unknown> {
  const loops = { talker, "small-balance": smallBalance, lifecycle: lifecycleUser, churn };
  return Promise.all(
    users.map((u) =>
      loops[u.role](t, u).catch((error: unknown) => t.log(`traffic of ${u.id} failed: ${error}`)),
    ),
  );
}
