import { execFile } from "node:child_process";
import { promisify } from "node:util";
import type { Platform } from "./platform.ts";
import type { SoakUser } from "./users.ts";

// Why an agent is not in the state asked of it (issue 52's convergence finding): the row's
// observed and desired state, its last error, the reconcile back-off and the instance's last
// jobs, so a run tells a platform fault (a job that failed or never ran, a lock held) from a
// starved machine (a gateway still booting, its jobs done).

interface Row {
  id: string;
  observed_state: string;
  desired_state: string;
  health: string;
  last_error: string | null;
  last_error_at: Date | null;
  crash_restarts: number;
  next_restart_at: Date | null;
  observed_at: Date | null;
  started_at: Date | null;
  container_id: string | null;
}

const run = promisify(execFile);
const hms = (d: Date | null | undefined) => (d ? d.toISOString().slice(11, 19) : "-");

export async function explain(p: Platform, user: SoakUser): Promise<string> {
  const [row] = await p.sql<Row[]>`
    select id, observed_state, desired_state, health, last_error, last_error_at, crash_restarts,
      next_restart_at, observed_at, started_at, container_id
    from instances where user_id = ${user.id}`;
  if (!row) return `${user.id}: no instance`;
  const jobs = await p.sql<
    { name: string; state: string; created_on: Date; completed_on: Date | null; output: unknown }[]
  >`
    select name, state, created_on, completed_on, output from pgboss.job
    where data->>'instanceId' = ${row.id}
    order by created_on desc limit 4`.catch(() => []);
  const job = jobs
    .map((j) => {
      const out = j.output ? JSON.stringify(j.output).slice(0, 120) : "";
      return `${j.name} ${j.state} ${hms(j.created_on)}→${hms(j.completed_on)}${out ? ` ${out}` : ""}`;
    })
    .join(", ");
  const engine = row.container_id
    ? (
        await run("docker", [
          "inspect",
          "--format",
          "{{.State.Status}} exit {{.State.ExitCode}} oom {{.State.OOMKilled}} restarts {{.RestartCount}} since {{.State.StartedAt}}",
          row.container_id,
        ]).catch((error: unknown) => ({ stdout: `inspect failed: ${String(error).slice(0, 80)}` }))
      ).stdout.trim()
    : "no container";
  return [
    `${row.id} (${user.role}) observed ${row.observed_state}/${row.health}, desired ${row.desired_state}`,
    `started ${hms(row.started_at)}, observed ${hms(row.observed_at)}`,
    `last_error ${row.last_error ? `"${row.last_error.slice(0, 160)}" at ${hms(row.last_error_at)}` : "none"}`,
    `crash_restarts ${row.crash_restarts}, next restart ${hms(row.next_restart_at)}`,
    `container ${row.container_id?.slice(0, 12) ?? "none"}: ${engine}`,
    `last jobs: ${job || "none"}`,
  ].join("; ");
}
