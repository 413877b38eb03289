import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import type Docker from "dockerode";
import { parse, stringify } from "yaml";
import { DockerRuntime } from "../../worker/runtime/docker.ts";
import { waitFor } from "../helpers/wait-for.ts";
import type { ClusterNode, SwarmCluster } from "../runtime/swarm-cluster.ts";
import { repoDir } from "./platform-image-build.ts";

// deploy/stack.yml deployed with `docker stack deploy` onto the test swarm (swarm-cluster.ts),
// as docs/running-across-hosts.md tells an operator to: the gateways' overlay made first, the
// secrets created, the db's node labelled. The test swarm's engines run without iptables
// (decision 0145), so the stack file is deployed with the three changes that needs: no
// routing-mesh port and DNS round robin for web instead of a virtual IP (neither IPVS nor the
// ingress network work without iptables), and the Docker sockets at the paths the test engines
// have; and a more patient health check for web (a shared test machine, below). The model is a local OpenAI-compatible server (bench/fake-openai.ts) run as one
// more service: a keyless OPENAI_BASE_URL, as a self-hosted operator with their own model server
// would configure it (decision 0157).

const run = promisify(execFile);
export const STACK = "agents";
export const FAKE_MODEL_REPLY = "Hello! How can I help you today?"; // bench/fake-openai.ts

/**
 * A call of the platform from inside a web replica (`inWeb(API_CALL, env)`) as a person's
 * browser at APP_URL makes it (its address and origin; a browser's user agent: sign-up turns away headless
 * ones; redirects not followed): METHOD, URL_PATH, BODY (JSON) or FORM (JSON of form fields),
 * COOKIE. Prints {status, body, cookie}.
 */
export const API_CALL = `
const headers = {
  origin: "http://localhost:3000",
  "user-agent": "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/140.0.0.0 Safari/537.36",
};
if (process.env.COOKIE) headers.cookie = process.env.COOKIE;
let body;
if (process.env.FORM) {
  headers["content-type"] = "application/x-www-form-urlencoded";
  body = new URLSearchParams(JSON.parse(process.env.FORM)).toString();
} else if (process.env.BODY) {
  headers["content-type"] = "application/json";
  body = process.env.BODY;
}
const r = await fetch("http://localhost:3000" + process.env.URL_PATH, {
  method: process.env.METHOD,
  headers,
  body,
  redirect: "manual",
  signal: AbortSignal.timeout(300_000),
});
const text = await r.text();
let parsed;
try { parsed = JSON.parse(text); } catch { parsed = text; }
const cookie = r.headers.getSetCookie().map((c) => c.split(";")[0]).join("; ");
console.log(JSON.stringify({ status: r.status, body: parsed, cookie }));
`;

export interface DeployedStack {
  /** Runs a Node script (ESM, top-level await) in a web replica; returns its stdout, trimmed. */
  inWeb(script: string, env?: Record<string, string>): Promise<string>;
  /** The stack's services' tasks: service name → node ids of its running tasks. */
  placement(): Promise<Record<string, string[]>>;
  remove(): Promise<void>;
}

type Doc = {
  services: Record<string, Record<string, unknown> & { environment?: Record<string, string> }>;
} & Record<string, unknown>;

const socketPath = (node: ClusterNode) => node.host.replace(/^unix:\/\//, "");

/** The stack file as the test swarm can run it (see above). */
export function stackForTestSwarm(
  cluster: SwarmCluster,
  options: { gatewayImage: string; operatorEmail: string; poolSize?: number },
): string {
  const doc = parse(readFileSync(path.join(repoDir, "deploy/stack.yml"), "utf8"), {
    merge: true,
  }) as Doc;
  const { web, worker } = doc.services;
  if (!web || !worker) throw new Error("deploy/stack.yml has no web or worker service");
  const model = { OPENAI_BASE_URL: "http://fake-model:8080/v1", OPENAI_API_KEY: "" };
  const operators = { OPERATOR_EMAILS: options.operatorEmail };
  delete web.ports;
  (web.deploy as Record<string, unknown>).endpoint_mode = "dnsrr";
  web.environment = { ...web.environment, ...model, ...operators };
  // The test machine is shared: under a load of 30-50 on its 2 cores a web replica took ~95 s
  // to listen, and the check's own `node -e` often more than its 5 s: the swarm killed every
  // replica, again and again (2026-12-05). Failed checks count from 5 minutes on, each may take
  // 30 s, and ten in a row make a replica unhealthy; a healthy replica is one at once.
  Object.assign(web.healthcheck as Record<string, unknown>, {
    start_period: "300s",
    timeout: "30s",
    retries: 10,
  });
  // The other nodes' engines, as SWARM_NODE_ENGINES names them, at their test socket paths.
  const others = cluster.nodes.filter((n) => n !== cluster.manager);
  worker.volumes = [
    `${socketPath(cluster.manager)}:/var/run/docker.sock`,
    ...others.map((n) => `${socketPath(n)}:/var/run/engine-${n.name}.sock`),
  ];
  worker.environment = {
    ...worker.environment,
    ...model,
    ...operators,
    SWARM_NODE_ENGINES: JSON.stringify(
      Object.fromEntries(others.map((n) => [n.nodeId, `unix:///var/run/engine-${n.name}.sock`])),
    ),
    AGENT_GATEWAY_IMAGE: options.gatewayImage,
    // Pooled gateways per node (0: none; each one boots a gateway on a 2-CPU machine).
    RUNTIME_POOL_SIZE: String(options.poolSize ?? 0),
    // A gateway's boot took longer than the default 3 minutes on the loaded shared machine.
    GATEWAY_HEALTH_TIMEOUT_MS: "480000",
  };
  doc.services["fake-model"] = {
    // biome-ignore lint/suspicious/noTemplateCurlyInString: interpolated by `docker stack deploy`
    image: "${PLATFORM_IMAGE}",
    command: ["node", "/fake/fake-openai.ts"],
    environment: { PORT: "8080", HOST: "0.0.0.0" },
    volumes: [`${path.join(repoDir, "bench/fake-openai.ts")}:/fake/fake-openai.ts:ro`],
    networks: ["backend"],
    deploy: { replicas: 1, endpoint_mode: "dnsrr" },
  };
  return stringify(doc);
}

/** Deploys the stack (image already loaded on every node); resolves when web answers. */
export async function deployPlatformStack(
  cluster: SwarmCluster,
  options: { image: string; gatewayImage: string; operatorEmail: string; poolSize?: number },
): Promise<DeployedStack> {
  const manager = cluster.manager;
  const dir = mkdtempSync(path.join(tmpdir(), "platform-stack-"));
  const cli = async (args: string[], input?: string, env: Record<string, string> = {}) => {
    const child = run("docker", args, {
      env: { ...process.env, DOCKER_HOST: manager.host, ...env },
      maxBuffer: 16 << 20,
    });
    if (input !== undefined) {
      child.child.stdin?.end(input);
    }
    return (await child).stdout.trim();
  };
  // What an operator does once (docs/running-across-hosts.md).
  await cli(["network", "create", "-d", "overlay", "--attachable", "agent-platform"]);
  const password = randomBytes(18).toString("base64url");
  const secrets = {
    postgres_password: password,
    database_url: `postgres://app:${password}@db:5432/app`,
    session_secret: randomBytes(32).toString("hex"),
    sealing_key: randomBytes(32).toString("hex"),
  };
  for (const [name, value] of Object.entries(secrets)) {
    await cli(["secret", "create", name, "-"], value);
  }
  await cli(["node", "update", "--label-add", "agent-platform.db=1", manager.nodeId]);
  const yaml = stackForTestSwarm(cluster, options);
  const file = path.join(dir, "stack.yml");
  writeFileSync(file, yaml);
  const gid = (await run("stat", ["-c", "%g", socketPath(manager)])).stdout.trim();
  await cli(["stack", "deploy", "--detach=true", "-c", file, STACK], undefined, {
    APP_URL: "http://localhost:3000",
    PLATFORM_IMAGE: options.image,
    DOCKER_GID: gid,
  });

  // Healthy replicas first: one the swarm has just started elsewhere (a drained node's) runs
  // before its server listens, and the routing mesh would not send it requests yet either.
  const webContainers = async () => {
    const found: Array<{ docker: Docker; id: string; healthy: boolean }> = [];
    for (const node of cluster.nodes) {
      const list = await node.docker
        .listContainers({
          filters: { label: [`com.docker.swarm.service.name=${STACK}_web`], status: ["running"] },
        })
        .catch(() => []);
      for (const c of list) {
        found.push({ docker: node.docker, id: c.Id, healthy: c.Status.includes("(healthy)") });
      }
    }
    return found.sort((a, b) => Number(b.healthy) - Number(a.healthy));
  };
  const engines = new Map(
    cluster.nodes.map((n) => [n.docker, new DockerRuntime({ host: n.host })]),
  );
  const inWeb = async (script: string, env: Record<string, string> = {}) => {
    const [target] = await webContainers();
    if (!target) throw new Error("no web replica is running");
    const runtime = engines.get(target.docker) as DockerRuntime;
    const assignments = Object.entries(env).map(([k, v]) => `${k}=${v}`);
    const result = await runtime.exec(target.id, [
      "env",
      ...assignments,
      "node",
      "--input-type=module",
      "-e",
      script,
    ]);
    if (result.exitCode !== 0) {
      throw new Error(
        `script in web failed (${result.exitCode}): ${result.stderr || result.stdout}`,
      );
    }
    return result.stdout.trim();
  };
  await waitFor(
    async () =>
      (await webContainers()).length >= 1 &&
      (await inWeb(
        "const r = await fetch('http://127.0.0.1:3000/api/health'); console.log(r.status)",
      ).catch(() => "")) === "200",
    { timeoutMs: 300_000, intervalMs: 1_000, what: "the stack's web answering /api/health" },
  );

  return {
    inWeb,
    async placement() {
      const tasks = (await manager.docker.listTasks()) as Array<{
        NodeID?: string;
        ServiceID?: string;
        DesiredState?: string;
        Status?: { State?: string };
      }>;
      const services = (await manager.docker.listServices()) as Array<{
        ID: string;
        Spec?: { Name?: string };
      }>;
      const names = new Map(services.map((s) => [s.ID, s.Spec?.Name ?? s.ID]));
      const out: Record<string, string[]> = {};
      for (const t of tasks) {
        if (t.Status?.State !== "running" || t.DesiredState !== "running") continue;
        const name = names.get(t.ServiceID ?? "") ?? "?";
        out[name] = [...(out[name] ?? []), t.NodeID ?? ""];
      }
      for (const nodes of Object.values(out)) nodes.sort();
      return out;
    },
    async remove() {
      await cli(["stack", "rm", STACK]).catch(() => "");
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
