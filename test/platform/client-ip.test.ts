import { afterEach, describe, expect, it } from "vitest";
import { clientIp } from "../../app/server/platform/client-ip.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";

const req = (xff?: string) =>
  new Request("http://localhost/", { headers: xff ? { "x-forwarded-for": xff } : {} });

describe("clientIp", () => {
  afterEach(() => {
    delete process.env.TRUSTED_PROXIES;
    resetEnvCache();
  });

  it("uses the socket peer when no proxy is trusted", () => {
    expect(clientIp(req("1.2.3.4"), "::ffff:192.0.2.1")).toBe("192.0.2.1");
  });

  it("walks X-Forwarded-For from the right, skipping trusted proxies", () => {
    process.env.TRUSTED_PROXIES = "10.0.0.0/8, 192.0.2.1";
    resetEnvCache();
    expect(clientIp(req("6.6.6.6, 203.0.113.5, 10.1.1.1"), "192.0.2.1")).toBe("203.0.113.5");
    expect(clientIp(req(), "10.2.3.4")).toBe("10.2.3.4");
    expect(clientIp(req("junk, 203.0.113.8"), "10.2.3.4")).toBe("203.0.113.8");
  });

  it("rejects a malformed TRUSTED_PROXIES entry loudly", () => {
    process.env.TRUSTED_PROXIES = "not-an-ip";
    resetEnvCache();
    expect(() => clientIp(req(), "10.2.3.4")).toThrow(/TRUSTED_PROXIES/);
  });
});
