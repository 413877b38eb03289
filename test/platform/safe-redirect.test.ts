import { describe, expect, it } from "vitest";
import { safeRedirect } from "../../app/server/platform/safe-redirect.server.ts";

// The one check of redirect targets taken from requests (sign-in, wallet callback, the agent
// ingress's hand-off): a same-origin absolute path, or the caller's default.

describe("safeRedirect", () => {
  it("keeps a same-origin absolute path with its query and fragment", () => {
    for (const path of [
      "/",
      "/agents?tab=logs#top",
      "/chat?x=1",
      "/agents?name=Ada%20Lovelace",
      "/a/b%2Fc",
    ]) {
      expect(safeRedirect(path, "/fallback"), path).toBe(path);
    }
  });

  it("falls back for anything a browser could read as another site, or not a path", () => {
    for (const away of [
      "//evil.example",
      "/\\evil.example",
      "\\\\evil.example",
      "/%5Cevil.example",
      "/%5cevil.example",
      "/%2F/evil.example",
      "/%2f%2fevil.example",
      "/\t/evil.example", // a browser drops the tab: //evil.example
      "/\n/evil.example",
      "/\r/evil.example",
      "/ /evil.example",
      "/\u0000evil",
      "/%00evil",
      "/\u200b/evil.example",
      "https://evil.example/",
      "https:/evil.example",
      "javascript:alert(1)",
      "evil.example",
      "",
      "/%E0%A4%A", // undecodable
      undefined,
      null,
      42,
    ]) {
      expect(safeRedirect(away, "/fallback"), JSON.stringify(away)).toBe("/fallback");
    }
  });
});
