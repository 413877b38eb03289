import { describe, expect, it } from "vitest";
import { limitByIp } from "../../app/server/accounts/pages.server.ts";
import { apiRoute, endpoint } from "../../app/server/api.server.ts";
import { limitedAddress } from "../../app/server/platform/address-key.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import {
  attempt,
  consume,
  rateLimitScopes,
  resetRateLimiters,
} from "../../app/server/platform/rate-limit.server.ts";
import { call } from "../helpers/api.ts";

describe("the PostgreSQL rate limiter", () => {
  it("allows exactly the scope's points, then refuses with Retry-After", async () => {
    const { points } = rateLimitScopes.instance;
    for (let i = 1; i <= points; i++) {
      const d = await consume("instance", "user:exact");
      expect(d.allowed).toBe(true);
      expect(d.headers["RateLimit-Remaining"]).toBe(String(points - i));
      expect(d.headers["RateLimit-Limit"]).toBe(String(points));
    }
    const refused = await consume("instance", "user:exact");
    expect(refused.allowed).toBe(false);
    expect(Number(refused.headers["Retry-After"])).toBeGreaterThanOrEqual(1);
    expect(Number(refused.headers["Retry-After"])).toBeLessThanOrEqual(60);
  });

  it("keeps keys and scopes apart", async () => {
    for (let i = 0; i < rateLimitScopes.instance.points; i++) await consume("instance", "user:a");
    expect((await consume("instance", "user:a")).allowed).toBe(false);
    expect((await consume("instance", "user:b")).allowed).toBe(true);
    expect((await consume("chat", "user:a")).allowed).toBe(true);
  });

  it("counts concurrent requests exactly (shared store, atomic upsert)", async () => {
    const results = await Promise.all(
      Array.from({ length: 40 }, () => consume("instance", "user:concurrent")),
    );
    expect(results.filter((r) => r.allowed)).toHaveLength(rateLimitScopes.instance.points);
  });
});

describe("local point leases", () => {
  const counted = async (key: string) => {
    const [row] = await db()`select points from rate_limits where key = ${`agents:${key}`}`;
    return row?.points as number | undefined;
  };
  const spend = async (key: string) => {
    let allowed = 0;
    while ((await consume("agents", key)).allowed) allowed++;
    return allowed;
  };

  it("takes points from the shared counter five at a time and hands them out exactly", async () => {
    const first = await consume("agents", "user:lease");
    expect(first.headers["RateLimit-Remaining"]).toBe("99");
    expect(await counted("user:lease")).toBe(5);
    for (let i = 0; i < 4; i++) await consume("agents", "user:lease");
    expect(await counted("user:lease")).toBe(5); // served locally
    expect(await spend("user:lease")).toBe(95);
    expect(await counted("user:lease")).toBeGreaterThanOrEqual(100);
  });

  it("grants the last free points of a partial lease, never one more", async () => {
    await consume("agents", "user:partial"); // counter 5, 4 left here
    await attempt("agents", "user:partial"); // counter 6, the local lease dropped
    expect(await spend("user:partial")).toBe(94);
  });

  it("is stricter, never looser, across replicas", async () => {
    for (let i = 0; i < 3; i++) await consume("agents", "user:replicas"); // 2 leased, unused
    resetRateLimiters(); // another process: it sees only the shared counter
    const elsewhere = await spend("user:replicas");
    expect(3 + elsewhere).toBeLessThanOrEqual(rateLimitScopes.agents.points);
    expect(elsewhere).toBe(95);
  });
});

describe("rate-limited routes", () => {
  const limited = apiRoute({
    POST: endpoint({
      summary: "x",
      auth: "none",
      rateLimit: "forgot-password",
      handler: () => ({ ok: true }),
    }),
  });

  it("answer 429 {error} with Retry-After and RateLimit headers once the per-IP budget is spent", async () => {
    const { points } = rateLimitScopes["forgot-password"];
    for (let i = 0; i < points; i++) {
      const ok = await call(limited, "/x", { method: "POST", remoteAddress: "203.0.113.9" });
      expect(ok.status).toBe(200);
      expect(ok.headers.get("ratelimit-remaining")).toBe(String(points - i - 1));
    }
    const res = await call(limited, "/x", { method: "POST", remoteAddress: "203.0.113.9" });
    expect(res.status).toBe(429);
    expect(res.json.error).toMatch(/Too many requests/);
    expect(res.headers.get("retry-after")).toBeTruthy();
    expect(res.headers.get("ratelimit-limit")).toBe(String(points));
    const other = await call(limited, "/x", { method: "POST", remoteAddress: "203.0.113.10" });
    expect(other.status).toBe(200);
  });

  it("ignores X-Forwarded-For from an untrusted peer", async () => {
    const { points } = rateLimitScopes["forgot-password"];
    for (let i = 0; i < points; i++) {
      await call(limited, "/x", {
        method: "POST",
        remoteAddress: "198.51.100.7",
        headers: { "x-forwarded-for": `10.0.0.${i}` },
      });
    }
    const res = await call(limited, "/x", {
      method: "POST",
      remoteAddress: "198.51.100.7",
      headers: { "x-forwarded-for": "10.0.0.250" },
    });
    expect(res.status).toBe(429);
  });
});

describe("the address a per-IP limit counts (docs/decisions/0196)", () => {
  it("is an IPv4 address as is, an IPv6 one by its /64, an IPv4-mapped one as its IPv4", () => {
    expect(limitedAddress("203.0.113.5")).toBe("203.0.113.5");
    expect(limitedAddress("2001:db8:1:2::1")).toBe("2001:db8:1:2::/64");
    expect(limitedAddress("2001:0DB8:0001:0002:ffff:1:2:3")).toBe("2001:db8:1:2::/64");
    expect(limitedAddress("2001:db8::")).toBe("2001:db8:0:0::/64");
    expect(limitedAddress("fe80::1%eth0")).toBe("fe80:0:0:0::/64");
    expect(limitedAddress("::ffff:192.0.2.1")).toBe("192.0.2.1");
    expect(limitedAddress("::ffff:c000:201")).toBe("192.0.2.1");
    expect(limitedAddress("1::ffff:192.0.2.1")).toBe("1:0:0:0::/64"); // not a mapped address
    expect(limitedAddress("unknown")).toBe("unknown");
  });

  const limited = apiRoute({
    POST: endpoint({
      summary: "x",
      auth: "none",
      rateLimit: "reset-password",
      handler: () => ({ ok: true }),
    }),
  });
  const post = (remoteAddress: string) => call(limited, "/x", { method: "POST", remoteAddress });

  it("an API route's per-IP budget holds across a rotating IPv6 /64, not across /64s", async () => {
    const { points } = rateLimitScopes["reset-password"];
    for (let i = 0; i < points; i++) {
      expect((await post(`2001:db8:aa:1:${i.toString(16)}::1`)).status).toBe(200);
    }
    expect((await post("2001:db8:aa:1:ffff:ffff:ffff:ffff")).status).toBe(429);
    expect((await post("2001:db8:aa:2::1")).status).toBe(200);
  });

  it("an IPv4-mapped IPv6 client shares its IPv4 address's budget", async () => {
    const { points } = rateLimitScopes["reset-password"];
    for (let i = 0; i < points; i++) {
      const spelled = ["203.0.113.20", "::ffff:203.0.113.20", "::ffff:cb00:7114"][i % 3]!;
      expect((await post(spelled)).status).toBe(200);
    }
    expect((await post("203.0.113.20")).status).toBe(429);
    expect((await post("::ffff:cb00:7114")).status).toBe(429);
  });

  it("a page action's per-IP limit (limitByIp) holds across a rotating IPv6 /64", async () => {
    const { points } = rateLimitScopes["forgot-password"];
    const request = new Request("http://localhost/forgot-password", { method: "POST" });
    for (let i = 0; i < points; i++) {
      await limitByIp(request, { remoteAddress: `2001:db8:bb:7::${i + 1}` }, "forgot-password");
    }
    await expect(
      limitByIp(request, { remoteAddress: "2001:db8:bb:7:1:2:3:4" }, "forgot-password"),
    ).rejects.toMatchObject({ status: 429 });
    await limitByIp(request, { remoteAddress: "2001:db8:bb:8::1" }, "forgot-password");
  });
});
