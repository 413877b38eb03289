import { readFile } from "node:fs/promises";
import { BaseSequencer, type TestSpecification } from "vitest/node";
import { gatewayBuildPending } from "./gateway-build.ts";

// The files that drive real gateways (in containers, describeDocker; or as a local process,
// installOpenclaw) are few but take most of the run, and most of their time is spent waiting
// on the gateways. They start first, so that with more than one worker the files that need
// only the database fill the waits, and the run does not end on one long gateway file. While
// `.ci/run` is still building the gateway image they start last instead, so the others run
// during the build (decision 0098). Among themselves, and among the rest, the order is
// vitest's own (the last run's durations, else the larger file first).

const drivesGateways = new Map<string, Promise<boolean>>();

function slow(file: string): Promise<boolean> {
  let found = drivesGateways.get(file);
  if (!found) {
    found = readFile(file, "utf8").then(
      (text) => /describeDocker\(|installOpenclaw\(/.test(text),
      () => false,
    );
    drivesGateways.set(file, found);
  }
  return found;
}

export default class GatewaysFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const first = await Promise.all(sorted.map((spec) => slow(spec.moduleId)));
    const gateways = sorted.filter((_, i) => first[i]);
    const others = sorted.filter((_, i) => !first[i]);
    return gatewayBuildPending() ? [...others, ...gateways] : [...gateways, ...others];
  }
}
