import { readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { BaseSequencer, type TestSpecification } from "vitest/node";
import { z } from "zod";
import { gatewayBuildPending } from "./gateway-build.ts";

// The files that drive real gateways (in containers, describeDocker; or as a local process,
// installOpenclaw) are few but take most of the run, and most of their time is spent waiting
// on the gateways. They start first, so that with more than one worker the files that need
// only the database fill the waits, and the run does not end on one long gateway file. While
// `.ci/run` is still building the gateway image they start last instead, so the others run
// during the build (decision 0098). Among themselves they go longest first, by the seconds
// file-seconds.json records from a full run (a clean checkout, as in CI, has no vitest cache to
// go by; a file not listed counts as a typical 60 s): a long file started late is the run's
// tail (decision 0182). The rest keep vitest's order (the last run's durations, else the
// larger file first).

// Files that start from the older OpenClaw build (GATEWAY_OLD_BUILD_STATUS, decision 0161) wait
// for that build, which follows the current one, while it is still running. They go among the
// gateway files once half of those files' recorded seconds are scheduled before them, when the
// older build has long ended: put last, a long one was the run's tail, one core idle for minutes
// (decision 0188).

const texts = new Map<string, Promise<string>>();
const textOf = (file: string) => {
  let found = texts.get(file);
  if (!found) {
    found = readFile(file, "utf8").catch(() => "");
    texts.set(file, found);
  }
  return found;
};
const slow = async (file: string) =>
  /describeDocker\(|describeSwarm\(|installOpenclaw\(/.test(await textOf(file));

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), "../..");
const recorded = z
  .object({ seconds: z.record(z.string(), z.number()) })
  .parse(JSON.parse(readFileSync(path.join(root, "test/setup/file-seconds.json"), "utf8"))).seconds;
const secondsOf = (file: string) => recorded[path.relative(root, file)] ?? 60;
const needsOlderBuild = async (file: string) =>
  (await textOf(file)).includes("GATEWAY_OLD_BUILD_STATUS");

export default class GatewaysFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const first = await Promise.all(sorted.map((spec) => slow(spec.moduleId)));
    const older = await Promise.all(sorted.map((spec) => needsOlderBuild(spec.moduleId)));
    const waitsForOlder = (i: number) =>
      older[i] && gatewayBuildPending("GATEWAY_OLD_BUILD_STATUS");
    const gateways = withDeferred(
      sorted
        .filter((_, i) => first[i] && !waitsForOlder(i))
        .sort((a, b) => secondsOf(b.moduleId) - secondsOf(a.moduleId)),
      sorted.filter((_, i) => first[i] && waitsForOlder(i)),
    );
    const others = sorted.filter((_, i) => !first[i]);
    return gatewayBuildPending() ? [...others, ...gateways] : [...gateways, ...others];
  }
}

/** `files` (longest first) with `deferred` after the first half of their recorded seconds. */
function withDeferred(files: TestSpecification[], deferred: TestSpecification[]) {
  if (deferred.length === 0) return files;
  const half = files.reduce((sum, spec) => sum + secondsOf(spec.moduleId), 0) / 2;
  let scheduled = 0;
  const at = files.findIndex((spec) => {
    scheduled += secondsOf(spec.moduleId);
    return scheduled >= half;
  });
  return [...files.slice(0, at + 1), ...deferred, ...files.slice(at + 1)];
}
