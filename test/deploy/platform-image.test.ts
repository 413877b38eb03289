import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../runtime/docker-support.ts";
import { buildPlatformImage } from "./platform-image-build.ts";

// The platform image (deploy/build-image.sh) in the roles deploy/stack.yml gives it: `db` (the
// embedded PostgreSQL on the network, a named volume, its password a secret file), `web` and
// `worker`, on a user-defined bridge of the machine's engine, secrets as files like Docker
// secrets (/run/secrets/<name>, <NAME>_FILE). The swarm itself is not made here: the test swarm's
// engines run without iptables, so its routing mesh cannot publish a port (decision 0177).
// No Docker engine: the test fails, it is not skipped.

const run = promisify(execFile);
const id = `pit-${process.pid}-${randomBytes(3).toString("hex")}`;
const label = `agent-platform.test=${id}`;
const secrets = mkdtempSync(path.join(tmpdir(), "platform-image-secrets-"));

const docker = async (...args: string[]) =>
  (await run("docker", args, { maxBuffer: 16 * 1024 * 1024 })).stdout.trim();

let image = "";
// Timings on the run's output: decision 0177 records them.
const note = (line: string) => process.stderr.write(`[platform-image] ${line}\n`);

async function logs(container: string): Promise<string> {
  const { stdout, stderr } = await run("docker", ["logs", container], { maxBuffer: 16 << 20 });
  return stdout + stderr;
}

async function health(): Promise<{ status: string; version: string } | undefined> {
  // Read each time: a restarted container may get another ephemeral host port.
  const published = await docker("port", `${id}-web`, "3000/tcp");
  const url = `http://127.0.0.1:${published.split("\n")[0]!.split(":").at(-1)}/api/health`;
  const response = await fetch(url, { signal: AbortSignal.timeout(3_000) });
  const body = (await response.json()) as { status: string; version: string };
  return body.status === "ok" ? body : undefined;
}

function secret(name: string, value: string): string {
  const file = path.join(secrets, name);
  // Readable by the image's user (1000), as swarm mounts secrets (0444) by default.
  writeFileSync(file, `${value}\n`, { mode: 0o444 });
  return `${file}:/run/secrets/${name}:ro`;
}

const appSecrets = () => {
  const password = randomBytes(18).toString("base64url");
  return {
    db: [
      "-v",
      secret("postgres_password", password),
      "-e",
      "POSTGRES_PASSWORD_FILE=/run/secrets/postgres_password",
    ],
    app: [
      ...["-v", secret("database_url", `postgres://app:${password}@db:5432/app`)],
      ...["-v", secret("session_secret", randomBytes(32).toString("hex"))],
      ...["-v", secret("sealing_key", randomBytes(32).toString("hex"))],
      ...["-e", "DATABASE_URL_FILE=/run/secrets/database_url"],
      ...["-e", "SESSION_SECRET_FILE=/run/secrets/session_secret"],
      ...["-e", "SEALING_KEY_FILE=/run/secrets/sealing_key"],
      ...["-e", "APP_URL=http://localhost:3000"],
    ],
  };
};

beforeAll(async () => {
  const started = Date.now();
  image = await buildPlatformImage();
  note(`platform image ${image} ready in ${Date.now() - started} ms`);
}, 900_000);

afterAll(async () => {
  const containers = (await docker("ps", "-aq", "--filter", `label=${label}`).catch(() => ""))
    .split("\n")
    .filter(Boolean);
  if (containers.length) await docker("rm", "-f", "-v", ...containers).catch(() => {});
  await docker("volume", "rm", "-f", `${id}-db`).catch(() => {});
  await docker("network", "rm", id).catch(() => {});
  rmSync(secrets, { recursive: true, force: true });
});

describe("the platform image", () => {
  it("carries no secret and runs as a non-root user", async () => {
    const config = JSON.parse(
      await docker("image", "inspect", "--format", "{{json .Config}}", image),
    );
    expect(config.User).toBe("1000:1000");
    const names = (config.Env as string[]).map((e) => e.split("=")[0]);
    expect(names).not.toEqual(
      expect.arrayContaining([expect.stringMatching(/SECRET|KEY|PASSWORD|DATABASE_URL/)]),
    );
    expect(config.Labels["agent-platform.sources-sha256"]).toMatch(/^[0-9a-f]{16}$/);
    // The repository's local files are not in it.
    const listing = await docker("run", "--rm", "--network", "none", image, "ls", "-a", "/app");
    expect(listing.split("\n")).not.toEqual(expect.arrayContaining([".env", ".data", "test"]));
  });

  it("serves /api/health from the web role against the db role, and again after the db crashes", async () => {
    const { db, app } = appSecrets();
    await docker("network", "create", "--label", label, id);
    await docker("volume", "create", "--label", label, `${id}-db`);
    const common = ["run", "-d", "--init", "--label", label, "--network", id];
    const t0 = Date.now();
    await docker(
      ...common,
      ...["--name", `${id}-db`, "--network-alias", "db", "-v", `${id}-db:/data`],
      ...db,
      image,
      "db",
    );
    // As the swarm would, web and worker restart when they fail; they start once db is ready
    // here so that the test's published port stays the same.
    await waitFor(
      async () => (await logs(`${id}-db`)).includes("role app and database app ready"),
      {
        timeoutMs: 120_000,
        intervalMs: 500,
        what: "db ready",
      },
    );
    const restarting = [...common, "--restart", "on-failure"];
    await docker(
      ...restarting,
      ...["--name", `${id}-web`, "-p", "127.0.0.1::3000"],
      ...app,
      image,
      "web",
    );
    await docker(
      ...restarting,
      ...["--name", `${id}-worker`, "-e", "RUNTIME_POOL_SIZE=0", "-e", "RUNTIME_DRIVER=docker"],
      ...app,
      image,
      "worker",
    );
    const body = await waitFor(health, {
      timeoutMs: 120_000,
      intervalMs: 500,
      what: "web healthy",
    });
    expect(body.version).toMatch(/^\d+\.\d+\.\d+/);
    note(`db + web up and healthy in ${Date.now() - t0} ms`);
    // The worker role is up on the same database (pg-boss started; no Docker socket given).
    await waitFor(async () => (await logs(`${id}-worker`)).includes('"queues"'), {
      timeoutMs: 60_000,
      intervalMs: 500,
      what: "worker's queues",
    });
    expect(await docker("inspect", "--format", "{{.State.Running}}", `${id}-worker`)).toBe("true");

    // A db that died (SIGKILL: its postmaster.pid stays on the volume) starts again on it.
    const t1 = Date.now();
    await docker("kill", `${id}-db`);
    await docker("start", `${id}-db`);
    await waitFor(health, {
      timeoutMs: 90_000,
      intervalMs: 500,
      what: "web healthy after the db's crash",
    });
    note(`healthy again ${Date.now() - t1} ms after the db's crash`);
    await waitFor(
      async () => (await logs(`${id}-db`)).split("role app and database app ready").length === 3,
      { timeoutMs: 30_000, intervalMs: 500, what: "db's second start" },
    );
  }, 300_000);
});
