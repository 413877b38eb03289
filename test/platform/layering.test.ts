import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

// app/server/platform/ knows no business area (ARCHITECTURE.md, decision 0094): nothing under it
// imports from the rest of app/ (areas, the app-level wiring, routes). The entry and
// app/server/api.server.ts hand the areas in.

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const app = path.join(repo, "app");
const platform = path.join(app, "server/platform");

/** Every module specifier of a source text: static imports, re-exports and dynamic imports. */
function importSpecifiers(source: string): string[] {
  const found: string[] = [];
  const patterns = [
    /\bfrom\s*["']([^"']+)["']/g,
    /\bimport\s*["']([^"']+)["']/g,
    /\bimport\s*\(\s*["']([^"']+)["']\s*\)/g,
  ];
  for (const pattern of patterns) {
    for (const match of source.matchAll(pattern)) found.push(match[1]!);
  }
  return found;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(full);
    return /\.tsx?$/.test(entry.name) ? [full] : [];
  });
}

/** The imports of `file` that land in app/ outside the platform, as "file -> specifier". */
function crossings(file: string, source: string): string[] {
  return importSpecifiers(source)
    .filter((spec) => spec.startsWith("."))
    .filter((spec) => {
      const target = path.resolve(path.dirname(file), spec);
      const inApp = target.startsWith(`${app}${path.sep}`);
      return inApp && !target.startsWith(`${platform}${path.sep}`);
    })
    .map((spec) => `${path.relative(repo, file)} -> ${spec}`);
}

describe("the platform layer", () => {
  it("finds static, type-only, re-export and dynamic imports", () => {
    const source = [
      'import { a } from "../accounts/auth.server.ts";',
      'import type { B } from "./b.server.ts";',
      'export { c } from "../agents/c.server.ts";',
      'import "./side-effect.ts";',
      'const d = await import("../ai/d.server.ts");',
    ].join("\n");
    expect(importSpecifiers(source)).toEqual(
      expect.arrayContaining([
        "../accounts/auth.server.ts",
        "./b.server.ts",
        "../agents/c.server.ts",
        "./side-effect.ts",
        "../ai/d.server.ts",
      ]),
    );
    const file = path.join(platform, "example.server.ts");
    expect(crossings(file, source)).toEqual([
      "app/server/platform/example.server.ts -> ../accounts/auth.server.ts",
      "app/server/platform/example.server.ts -> ../agents/c.server.ts",
      "app/server/platform/example.server.ts -> ../ai/d.server.ts",
    ]);
  });

  it("imports nothing of app/ outside app/server/platform/", () => {
    const files = sourceFiles(platform);
    expect(files.length).toBeGreaterThan(10);
    const found = files.flatMap((file) => crossings(file, readFileSync(file, "utf8")));
    expect(found).toEqual([]);
  });
});
