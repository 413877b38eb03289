import { freemem } from "node:os";
import { afterEach, describe, expect, it } from "vitest";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import {
  POOL_DEFAULT_MIN_FREE_GIB,
  poolSize,
  resetPoolSize,
} from "../../worker/instances/pool-size.ts";
import { DockerRuntime } from "../../worker/runtime/docker.ts";
import { processRuntime, setRuntime } from "../../worker/runtime/index.ts";

// The warm pool's default size (decision 0159): a set RUNTIME_POOL_SIZE always wins; unset, one
// gateway on a Docker host with the memory for it, none otherwise. No container is started here.

function withPoolSize(value: string | undefined) {
  if (value === undefined) delete process.env.RUNTIME_POOL_SIZE;
  else process.env.RUNTIME_POOL_SIZE = value;
  resetEnvCache();
  resetPoolSize();
}

afterEach(() => {
  withPoolSize("0");
  setRuntime(undefined);
});

describe("poolSize", () => {
  it("is the configured size whenever one is set, 0 included", () => {
    setRuntime(new DockerRuntime());
    withPoolSize("0");
    expect(poolSize()).toBe(0);
    withPoolSize("3");
    expect(poolSize()).toBe(3);
  });

  it("unset: 1 with Docker and enough available memory, else 0", () => {
    withPoolSize(undefined);
    setRuntime(new DockerRuntime());
    const roomy = freemem() >= POOL_DEFAULT_MIN_FREE_GIB * 2 ** 30;
    expect(poolSize()).toBe(roomy ? 1 : 0);

    resetPoolSize();
    setRuntime(processRuntime());
    expect(poolSize()).toBe(0);
  });
});
