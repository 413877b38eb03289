import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { z } from "zod";
import { registerDatabaseGauges } from "../../app/server/ops/prometheus.server.ts";
import { HTTP_PAGE } from "../../app/server/platform/metrics/http.server.ts";
import { registry } from "../../app/server/platform/metrics/registry.server.ts";
import "../../app/server/ai/ai-metrics.server.ts";
import "../../worker/metrics.ts";

// deploy/prometheus/ (issue 51): the alert rules pass `promtool check rules` and fire in a
// `promtool test rules` case each; the scrape config passes `promtool check config`; the
// platform's exposition passes `promtool check metrics`; the rules and the Grafana dashboard
// name only metrics the platform exposes, in valid PromQL. promtool comes with Debian's
// `prometheus` package: without it the file is skipped locally and fails under CI.

const run = promisify(execFile);
const dir = path.resolve(import.meta.dirname, "../../deploy/prometheus");
const tmp = mkdtempSync(path.join(tmpdir(), "promtool-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

async function hasPromtool(): Promise<boolean> {
  try {
    await run("promtool", ["--version"]);
    return true;
  } catch {
    return false;
  }
}
const available = await hasPromtool();

async function promtool(args: string[], stdin?: string) {
  const child = run("promtool", args, { cwd: dir });
  if (stdin !== undefined) {
    child.child.stdin?.end(stdin);
  }
  try {
    const { stdout, stderr } = await child;
    return { code: 0, out: stdout + stderr };
  } catch (error) {
    const e = error as { code?: number; stdout?: string; stderr?: string };
    return { code: e.code ?? 1, out: `${e.stdout ?? ""}${e.stderr ?? ""}` };
  }
}

const rulesFile = z.object({
  groups: z.array(z.object({ rules: z.array(z.object({ alert: z.string(), expr: z.string() })) })),
});
const testsFile = z.object({
  tests: z.array(
    z.object({
      name: z.string(),
      alert_rule_test: z.array(
        z.object({ alertname: z.string(), exp_alerts: z.array(z.unknown()) }),
      ),
    }),
  ),
});
const dashboard = z.object({
  panels: z.array(z.object({ targets: z.array(z.object({ expr: z.string() })).optional() })),
});

const alerts = rulesFile.parse(parse(readFileSync(path.join(dir, "alerts.yml"), "utf8")));
const rules = alerts.groups.flatMap((g) => g.rules);
const panelExprs = dashboard
  .parse(JSON.parse(readFileSync(path.join(dir, "grafana-dashboard.json"), "utf8")))
  .panels.flatMap((p) => p.targets ?? [])
  .map((t) => t.expr);

/** The platform's metric names an expression reads (a histogram's by its base name). */
const platformMetricsIn = (expr: string) =>
  [...expr.matchAll(/\bplatform_[a-z_]+/g)].map((m) => m[0].replace(/_(bucket|count|sum)$/, ""));

describe("deploy/prometheus without promtool", () => {
  it.runIf(!available && process.env.CI)("fails under CI", () => {
    throw new Error("promtool is missing: apt-get install prometheus (.ci/run does)");
  });
});

describe.runIf(available)("deploy/prometheus", () => {
  it("passes promtool check rules", async () => {
    const { code, out } = await promtool(["check", "rules", "alerts.yml"]);
    expect(out).toContain("SUCCESS");
    expect(code).toBe(0);
  });

  it("has a promtool test rules case in which each alert fires, and they pass", async () => {
    const cases = testsFile.parse(parse(readFileSync(path.join(dir, "alerts.test.yml"), "utf8")));
    const firing = new Set(
      cases.tests.flatMap((t) =>
        t.alert_rule_test.filter((a) => a.exp_alerts.length > 0).map((a) => a.alertname),
      ),
    );
    expect([...firing].sort()).toEqual(rules.map((r) => r.alert).sort());
    const { code, out } = await promtool(["test", "rules", "alerts.test.yml"]);
    expect(out).toContain("SUCCESS");
    expect(code).toBe(0);
  });

  it("has a scrape config that passes promtool check config", async () => {
    const token = path.join(tmp, "metrics-token");
    writeFileSync(token, "metrics-token-0123456789");
    const config = readFileSync(path.join(dir, "prometheus.yml"), "utf8")
      .replaceAll("/etc/prometheus/metrics-token", token)
      .replace("alerts.yml", path.join(dir, "alerts.yml"));
    writeFileSync(path.join(tmp, "prometheus.yml"), config);
    const { code, out } = await promtool(["check", "config", path.join(tmp, "prometheus.yml")]);
    expect(out).toContain("SUCCESS");
    expect(code).toBe(0);
  });

  it("names only metrics the platform exposes, in valid PromQL", async () => {
    registerDatabaseGauges();
    const exposed = new Set((await registry.getMetricsAsJSON()).map((m) => m.name));
    for (const expr of [...rules.map((r) => r.expr), ...panelExprs]) {
      for (const name of platformMetricsIn(expr)) {
        expect(exposed, `${name} in ${expr}`).toContain(name);
      }
    }
    // promtool parses a rule file's expressions: the dashboard's go through it as recordings.
    const recordings = {
      groups: [
        {
          name: "dashboard",
          rules: panelExprs.map((expr, i) => ({ record: `dashboard:panel_${i}`, expr })),
        },
      ],
    };
    writeFileSync(path.join(tmp, "dashboard-rules.json"), JSON.stringify(recordings));
    const { code, out } = await promtool([
      "check",
      "rules",
      path.join(tmp, "dashboard-rules.json"),
    ]);
    expect(out).toContain("SUCCESS");
    expect(code).toBe(0);
  });

  it("exposes metrics that pass promtool check metrics", async () => {
    registerDatabaseGauges();
    HTTP_PAGE.record("GET", 200, 0.01); // a histogram with a sample
    const text = await registry.metrics();
    expect(text).toContain("platform_instances");
    const { code, out } = await promtool(["check", "metrics"], text);
    expect(out.trim()).toBe("");
    expect(code).toBe(0);
  });
});
