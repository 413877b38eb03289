import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import {
  openFilesLimit,
  parseOpenFilesLimit,
} from "../../app/server/platform/open-files.server.ts";

// The web's descriptor limit (issue 53, decision 0220): what it reads, and the Node behaviour
// `npm start` relies on: a node process started with a low soft limit runs at its hard limit.

const LIMITS = `Limit                     Soft Limit           Hard Limit           Units
Max processes             95393                95393                processes
Max open files            1024                 524288               files
Max locked memory         8388608              8388608              bytes
`;

describe("the open-files limit", () => {
  it("reads the Max open files row of /proc/<pid>/limits", () => {
    expect(parseOpenFilesLimit(LIMITS)).toEqual({ soft: 1024, hard: 524288 });
    expect(
      parseOpenFilesLimit(LIMITS.replace("1024                 524288", "unlimited unlimited")),
    ).toEqual({ soft: Number.POSITIVE_INFINITY, hard: Number.POSITIVE_INFINITY });
    expect(parseOpenFilesLimit("nothing here")).toBeUndefined();
  });

  it.runIf(process.platform === "linux")(
    "is raised to the hard limit by a node process started with a low soft one",
    () => {
      const own = openFilesLimit();
      expect(own).toBeDefined();
      const script = `import("${new URL("../../app/server/platform/open-files.server.ts", import.meta.url).href}").then((m) => console.log(JSON.stringify(m.openFilesLimit())))`;
      // The shell lowers its soft limit; the node it becomes inherits it and raises it again.
      const out = execFileSync(
        "sh",
        ["-c", 'ulimit -Sn 256 && exec "$0" "$@"', process.execPath, "-e", script],
        { encoding: "utf8" },
      );
      const child = JSON.parse(out) as { soft: number; hard: number };
      expect(child.hard).toBe(own?.hard);
      expect(child.soft).toBe(child.hard);
    },
  );
});
