#!/usr/bin/env node
// Prepares the OpenClaw channel plugins installed next to openclaw (npm dependencies in
// gateway/package.json that ship an openclaw.plugin.json, e.g. @openclaw/discord and
// @openclaw/whatsapp) so the gateway loads them offline as trusted official npm installs:
//
//   1. <app>/node_modules/<plugin>/node_modules/openclaw -> the host openclaw package (the
//      "peer link" OpenClaw itself creates after a managed npm install; its startup audit
//      refuses a plugin without it).
//   2. <app>/gateway-plugins.txt: one "<package> <version>" line per plugin. At start the
//      entrypoint (and the process driver) turn it into the state folder's managed npm root
//      ($OPENCLAW_STATE_DIR/npm: package.json + node_modules/<plugin> links), where OpenClaw
//      recovers npm install records for them; see docs/decisions/0085-chat-channel-plugins.md.
//
// Usage: node gateway/link-plugins.mjs <app folder holding package.json and node_modules>
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import path from "node:path";

const app = path.resolve(process.argv[2] ?? ".");
const pkg = JSON.parse(readFileSync(path.join(app, "package.json"), "utf8"));
const lines = [];
for (const [name, version] of Object.entries(pkg.dependencies ?? {})) {
  const dir = path.join(app, "node_modules", ...name.split("/"));
  if (!existsSync(path.join(dir, "openclaw.plugin.json"))) continue;
  const installed = JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8")).version;
  if (installed !== version) {
    throw new Error(`${name} is ${installed} in ${app}, package.json pins ${version}`);
  }
  const link = path.join(dir, "node_modules", "openclaw");
  const target = path.relative(path.dirname(link), path.join(app, "node_modules", "openclaw"));
  let current;
  try {
    current = lstatSync(link);
  } catch {}
  if (current) rmSync(link, { recursive: true, force: true });
  mkdirSync(path.dirname(link), { recursive: true });
  symlinkSync(target, link);
  lines.push(`${name} ${version}`);
}
writeFileSync(path.join(app, "gateway-plugins.txt"), lines.map((l) => `${l}\n`).join(""));
process.stderr.write(`link-plugins: ${lines.length ? lines.join(", ") : "no plugins"}\n`);
