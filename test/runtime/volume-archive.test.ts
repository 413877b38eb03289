import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ProcessRuntime } from "../../worker/runtime/process.ts";

// The process driver's half of the runtime's volume archive (exportVolume/importVolume): the
// state folder as a tar under state/, and back into another volume with modes kept. The Docker
// half is exercised by test/agents/backups.test.ts.

const root = mkdtempSync(join(tmpdir(), "volume-archive-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("process driver volume archive", () => {
  it("exports a volume and imports it into a fresh one, files and modes kept", async () => {
    const rt = new ProcessRuntime({
      root,
      resolveOpenclaw: () => undefined,
      versionOf: (image) => image,
    });
    await rt.ensureVolume("src");
    const src = rt.volumePath("src");
    mkdirSync(join(src, "workspace"), { recursive: true });
    writeFileSync(join(src, "workspace", "MEMORY.md"), "- likes tea\n", { mode: 0o640 });
    writeFileSync(join(src, "openclaw.json"), "{}", { mode: 0o600 });

    const tar = await rt.exportVolume("src");
    await rt.importVolume("dst", "unused", tar);
    const dst = rt.volumePath("dst");
    expect(readFileSync(join(dst, "workspace", "MEMORY.md"), "utf8")).toBe("- likes tea\n");
    expect(statSync(join(dst, "workspace", "MEMORY.md")).mode & 0o777).toBe(0o640);
    expect(statSync(join(dst, "openclaw.json")).mode & 0o777).toBe(0o600);
    await expect(rt.exportVolume("missing")).rejects.toThrow(/does not exist/);
  });
});
