import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

// Found by walking up from this module, so it works from source (worker, tests) and from the
// bundled build/ alike.
function readVersion(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const file = path.join(dir, "package.json");
    if (existsSync(file))
      return (JSON.parse(readFileSync(file, "utf8")) as { version: string }).version;
    const parent = path.dirname(dir);
    if (parent === dir) return "0.0.0";
    dir = parent;
  }
}

/** The platform's version (package.json), reported by health and the agent API. */
export const platformVersion: string = readVersion();
