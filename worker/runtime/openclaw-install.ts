import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { copyFile, mkdir } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { env } from "../../app/server/platform/env.server.ts";

// Where the process driver finds OpenClaw: the pinned version (gateway/package.json, the same
// one the image is built from), installed once under DATA_DIR/openclaw/<version> from
// gateway/package-lock.json, or a folder the operator names (RUNTIME_OPENCLAW_DIR), or the
// image build's staging copy.

export const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const gatewayPackage = JSON.parse(
  readFileSync(path.join(repo, "gateway/package.json"), "utf8"),
) as { dependencies: { openclaw: string } };

export const PINNED_OPENCLAW = gatewayPackage.dependencies.openclaw;

/** `agent-gateway:2026.9.6` → 2026.9.6; a tag that is not a version → the pinned version. */
export function openclawVersionOf(image: string): string {
  const tag = image.slice(image.lastIndexOf(":") + 1);
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
  return candidates.find(
    (dir) => existsSync(path.join(dir, "openclaw.mjs")) && versionAt(dir) === version,
  );
}

/** Installs the pinned OpenClaw from gateway/package-lock.json (~40 s, npm registry). */
export async function installOpenclaw(
  log: (line: string) => void,
  dir = installRoot(PINNED_OPENCLAW),
): Promise<string> {
  const found = resolveOpenclaw(PINNED_OPENCLAW);
  if (found) return found;
  await mkdir(dir, { recursive: true });
  for (const file of ["package.json", "package-lock.json"]) {
    await copyFile(path.join(repo, "gateway", file), path.join(dir, file));
  }
  log(`installing OpenClaw ${PINNED_OPENCLAW} for the process driver into ${dir}`);
  const npm = process.platform === "win32" ? "npm.cmd" : "npm";
  await new Promise<void>((resolve, reject) => {
    const child = spawn(npm, ["ci", "--no-audit", "--no-fund", "--loglevel=error"], {
      cwd: dir,
      stdio: ["ignore", "inherit", "inherit"],
    });
    child.once("error", reject);
    child.once("exit", (code) =>
      code === 0 ? resolve() : reject(new Error(`npm ci exited with ${code}`)),
    );
  });
  const installed = resolveOpenclaw(PINNED_OPENCLAW);
  if (!installed) throw new Error("OpenClaw install finished but openclaw.mjs is missing");
  return installed;
}
