import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { copyFile, lstat, mkdir, rename, rm, symlink, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { env } from "../../app/server/platform/env.server.ts";

// Where the process driver finds OpenClaw: the pinned version (gateway/package.json, the same
// one the image is built from), installed once under DATA_DIR/openclaw/<version> from
// gateway/package-lock.json, or a folder the operator names (RUNTIME_OPENCLAW_DIR), or the
// image build's staging copy.

export const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
interface PackageJson {
  dependencies: Record<string, string> & { openclaw: string };
}
const gatewayPackage = JSON.parse(
  readFileSync(path.join(repo, "gateway/package.json"), "utf8"),
) as PackageJson;

export const PINNED_OPENCLAW = gatewayPackage.dependencies.openclaw;

/**
 * `agent-gateway:2026.9.6` (a tag) or `openclaw@2026.9.6` (the process driver's image id) →
 * 2026.9.6; anything else → the pinned version.
 */
export function openclawVersionOf(image: string): string {
  const tag = image.slice(Math.max(image.lastIndexOf(":"), image.lastIndexOf("@")) + 1);
  return /^\d+\.\d+\.\d+/.test(tag) ? tag : PINNED_OPENCLAW;
}

const installRoot = (version: string) => path.resolve(repo, env().DATA_DIR, "openclaw", version);

function versionAt(dir: string): string | undefined {
  try {
    return (JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8")) as { version: string })
      .version;
  } catch {
    return undefined;
  }
}

/** The OpenClaw package folder (with openclaw.mjs) of `version`, if one is installed. */
export function resolveOpenclaw(version: string): string | undefined {
  const configured = env().RUNTIME_OPENCLAW_DIR;
  const candidates = [
    ...(configured
      ? [path.resolve(configured), path.resolve(configured, "node_modules/openclaw")]
      : []),
    path.join(installRoot(version), "node_modules/openclaw"),
    path.join(repo, ".data/openclaw", version, "node_modules/openclaw"),
    path.join(repo, ".data/gateway-build/base/app/node_modules/openclaw"),
  ];
  const usable = candidates.filter(
    (dir) => existsSync(path.join(dir, "openclaw.mjs")) && versionAt(dir) === version,
  );
  // Prefer an install that matches gateway/ now (with the channel plugins).
  return usable.find(upToDate) ?? usable[0];
}

/** The install folder (package.json, node_modules) of an OpenClaw package folder. */
const appOf = (openclawDir: string) => path.resolve(openclawDir, "../..");

/** Whether the folder is under RUNTIME_OPENCLAW_DIR: the operator's, never changed by us. */
function operators(openclawDir: string): boolean {
  const configured = env().RUNTIME_OPENCLAW_DIR;
  return !!configured && openclawDir.startsWith(path.resolve(configured));
}

/**
 * Whether an OpenClaw install carries what gateway/ pins now (the same exact dependencies, the
 * channel plugins prepared): an install made from an older gateway/package.json, e.g. one
 * without the plugins, is stale. (npm rewrites the lockfile of bundled dependencies on install,
 * so the lockfiles are not compared.) A folder the operator names (RUNTIME_OPENCLAW_DIR) is
 * theirs to keep current.
 */
function upToDate(openclawDir: string): boolean {
  if (operators(openclawDir)) return true;
  try {
    const deps = (dir: string) =>
      JSON.stringify(
        (JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8")) as PackageJson)
          .dependencies,
      );
    return (
      deps(appOf(openclawDir)) === deps(path.join(repo, "gateway")) &&
      existsSync(path.join(appOf(openclawDir), "gateway-plugins.txt"))
    );
  } catch {
    return false;
  }
}

/**
 * The channel plugins of an install (gateway/link-plugins.mjs wrote gateway-plugins.txt):
 * `[package, version]` pairs.
 */
export function pluginsOf(openclawDir: string): Array<[string, string]> {
  try {
    return readFileSync(path.join(appOf(openclawDir), "gateway-plugins.txt"), "utf8")
      .split("\n")
      .map((line) => line.trim().split(/\s+/))
      .filter((parts): parts is [string, string] => parts.length === 2 && Boolean(parts[0]));
  } catch {
    return [];
  }
}

/**
 * Links the install's channel plugins into a state folder's managed npm root, as the image's
 * entrypoint does: OpenClaw recovers trusted npm install records from `<state>/npm`
 * (package.json + node_modules/<plugin>), so Discord and WhatsApp load with no network.
 */
export async function linkPluginRoot(stateDir: string, openclawDir: string): Promise<void> {
  const plugins = pluginsOf(openclawDir);
  if (plugins.length === 0) return;
  const npmRoot = path.join(stateDir, "npm");
  for (const [name] of plugins) {
    const link = path.join(npmRoot, "node_modules", ...name.split("/"));
    await mkdir(path.dirname(link), { recursive: true, mode: 0o700 });
    const current = await lstat(link).catch(() => undefined);
    if (current) await rm(link, { recursive: true, force: true });
    await symlink(path.join(appOf(openclawDir), "node_modules", ...name.split("/")), link);
  }
  const pkg = {
    name: "agent-gateway-plugins",
    private: true,
    dependencies: Object.fromEntries(plugins),
  };
  const tmp = path.join(npmRoot, `package.json.tmp.${process.pid}`);
  await writeFile(tmp, `${JSON.stringify(pkg)}\n`, { mode: 0o600 });
  await rename(tmp, path.join(npmRoot, "package.json"));
}

/** Runs gateway/link-plugins.mjs on an install folder (peer links, gateway-plugins.txt). */
const linkPlugins = (dir: string) =>
  run(process.execPath, repo, [path.join(repo, "gateway/link-plugins.mjs"), dir]);

/**
 * Applies gateway/patch-openclaw.mjs's fixes to an install in place, as the image carries them
 * (decision 0242); idempotent, so an install made before a fix gets it at the next start.
 */
const patchOpenclaw = (dir: string) => {
  const modules = path.join(dir, "node_modules");
  const dist = path.join(modules, "openclaw", "dist");
  return run(process.execPath, repo, [
    path.join(repo, "gateway/patch-openclaw.mjs"),
    modules,
    dist,
  ]);
};

/**
 * Installs the pinned OpenClaw and its channel plugins from gateway/package-lock.json (~60 s,
 * npm registry); an install from an older lockfile is replaced. The install is made in a folder
 * of its own beside `dir` and renamed into place when complete, so an interrupted install (or
 * two at once into one shared folder) never leaves a half-installed copy that looks current.
 */
export async function installOpenclaw(
  log: (line: string) => void,
  dir = installRoot(PINNED_OPENCLAW),
): Promise<string> {
  const found = resolveOpenclaw(PINNED_OPENCLAW);
  if (found && upToDate(found)) {
    if (!operators(found)) await patchOpenclaw(appOf(found));
    return found;
  }
  const partial = `${dir}.partial-${process.pid}-${Date.now()}`;
  await mkdir(partial, { recursive: true });
  try {
    for (const file of ["package.json", "package-lock.json"]) {
      await copyFile(path.join(repo, "gateway", file), path.join(partial, file));
    }
    log(`installing OpenClaw ${PINNED_OPENCLAW} for the process driver into ${dir}`);
    await run(process.platform === "win32" ? "npm.cmd" : "npm", partial, [
      // Not `npm ci`: it refuses lockfiles whose bundled dependencies (the channel plugins ship
      // theirs) npm itself resolves differently; plain `npm install` follows the lockfile.
      "install",
      "--no-audit",
      "--no-fund",
      "--loglevel=error",
    ]);
    await linkPlugins(partial);
    await patchOpenclaw(partial);
    if (!existsSync(path.join(partial, "node_modules/openclaw/openclaw.mjs"))) {
      throw new Error("OpenClaw install finished but openclaw.mjs is missing");
    }
    const installed = path.join(dir, "node_modules/openclaw");
    // Another process may have completed the same install meanwhile: theirs stays.
    if (existsSync(installed) && upToDate(installed)) return installed;
    await rm(dir, { recursive: true, force: true });
    await rename(partial, dir);
    return installed;
  } finally {
    await rm(partial, { recursive: true, force: true });
  }
}

/** Runs `command args` in `cwd`, its output on ours; rejects on a non-zero exit. */
function run(command: string, cwd: string, args: string[]): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const child = spawn(command, args, { cwd, stdio: ["ignore", "inherit", "inherit"] });
    child.once("error", reject);
    child.once("exit", (code) =>
      code === 0 ? resolve() : reject(new Error(`${command} ${args[0]} exited with ${code}`)),
    );
  });
}
