import type { AppLoadContext } from "@remix-run/node";
import { afterEach, describe, expect, it, vi } from "vitest";
import * as signinPage from "../../app/routes/signin.tsx";
import { rateLimitScopes } from "../../app/server/platform/rate-limit.server.ts";
import { registerUser, signInUser, uniqueEmail } from "./helpers.ts";

// Password sign-in is throttled per client address (an IPv6 client by its /64) and per account,
// and a refused attempt costs no argon2 verify (issue 47, finding 4; docs/decisions/0196).

// Counts the argon2 verifies the platform runs, to see that a refusal spends none.
const verifies = vi.hoisted(() => ({ count: 0 }));
vi.mock("@node-rs/argon2", async (importOriginal) => {
  const real = await importOriginal<typeof import("@node-rs/argon2")>();
  return {
    ...real,
    verify: (...args: Parameters<typeof real.verify>) => {
      verifies.count++;
      return real.verify(...args);
    },
  };
});

const PASSWORD = "correct horse battery";
const ACCOUNT = rateLimitScopes["signin-failures"];
const ADDRESS = rateLimitScopes["signin-address"];

async function account() {
  const email = uniqueEmail("throttled");
  expect((await registerUser({ email, password: PASSWORD })).status).toBe(201);
  return email;
}

afterEach(() => {
  vi.useRealTimers();
});

describe("the per-address throttle", () => {
  it("answers 429 {error} with Retry-After once an address has failed its budget, whatever the email, before any argon2 verify", async () => {
    const ip = "203.0.113.77";
    for (let i = 0; i < ADDRESS.points; i++) {
      const res = await signInUser(uniqueEmail(`spray-${i}`), "guess", { remoteAddress: ip });
      expect(res.status).toBe(401);
    }
    expect(verifies.count).toBeGreaterThanOrEqual(ADDRESS.points); // the spy sees the checks
    const real = await account(); // a real account, its right password, from the same address
    const before = verifies.count;
    const refused = await signInUser(real, PASSWORD, { remoteAddress: ip });
    expect(refused.status).toBe(429);
    expect(refused.json).toEqual({ error: expect.stringMatching(/too many failed sign-in/i) });
    const retryAfter = Number(refused.headers.get("retry-after"));
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(ADDRESS.duration);
    expect(verifies.count).toBe(before);
    // Another address is not affected.
    expect((await signInUser(real, PASSWORD, { remoteAddress: "203.0.113.78" })).status).toBe(200);
  });

  it("counts an IPv6 client by its /64: rotating addresses inside it does not help", async () => {
    for (let i = 0; i < ADDRESS.points; i++) {
      const ip = `2001:db8:47:4::${(i + 1).toString(16)}`;
      expect((await signInUser(uniqueEmail("v6"), "guess", { remoteAddress: ip })).status).toBe(
        401,
      );
    }
    const real = await account();
    const inside = await signInUser(real, PASSWORD, { remoteAddress: "2001:db8:47:4:ffff::9" });
    expect(inside.status).toBe(429);
    const nextNet = await signInUser(real, PASSWORD, { remoteAddress: "2001:db8:47:5::1" });
    expect(nextNet.status).toBe(200);
  });

  it("a successful sign-in gives its point back: only failures use the budget", async () => {
    const ip = "203.0.113.79";
    const real = await account();
    for (let i = 0; i < ADDRESS.points - 1; i++) {
      await signInUser(uniqueEmail("almost"), "guess", { remoteAddress: ip });
    }
    expect((await signInUser(real, PASSWORD, { remoteAddress: ip })).status).toBe(200);
    // One failure is still left to this address, then it is refused.
    expect((await signInUser(uniqueEmail("last"), "guess", { remoteAddress: ip })).status).toBe(
      401,
    );
    expect((await signInUser(uniqueEmail("over"), "guess", { remoteAddress: ip })).status).toBe(
      429,
    );
  });

  it("the /signin page answers a clear form error (429) once its address's budget is spent", async () => {
    const post = (email: string, password: string) =>
      answer(() =>
        signinPage.action({
          request: new Request("http://localhost/signin", {
            method: "POST",
            headers: {
              origin: "http://localhost",
              "content-type": "application/x-www-form-urlencoded",
            },
            body: new URLSearchParams({ email, password }),
          }),
          params: {},
          context: { remoteAddress: "198.51.100.47" } as AppLoadContext,
        }),
      );
    for (let i = 0; i < ADDRESS.points; i++) {
      expect((await post(uniqueEmail("page"), "guess")).status).toBe(401);
    }
    const real = await account();
    const before = verifies.count;
    const refused = await post(real, PASSWORD);
    expect(refused.status).toBe(429);
    expect(refused.error).toMatch(/too many failed sign-in attempts from your network/i);
    expect(verifies.count).toBe(before);
  });
});

describe("the per-account throttle", () => {
  it("holds when the attacker rotates addresses, and refuses the right password until the window has passed", async () => {
    vi.useFakeTimers({ toFake: ["Date"] }); // the limiter's windows run on Date: moved, not waited
    const email = await account();
    for (let i = 0; i < ACCOUNT.points; i++) {
      const ip = `198.51.100.${100 + i}`;
      expect((await signInUser(email, `guess-${i}`, { remoteAddress: ip })).status).toBe(401);
    }
    const before = verifies.count;
    const locked = await signInUser(email, PASSWORD, { remoteAddress: "198.51.100.200" });
    expect(locked.status).toBe(429);
    expect(Number(locked.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(verifies.count).toBe(before);

    vi.setSystemTime(Date.now() + (ACCOUNT.duration - 60) * 1000); // a minute before the end
    expect((await signInUser(email, PASSWORD, { remoteAddress: "198.51.100.201" })).status).toBe(
      429,
    );
    vi.setSystemTime(Date.now() + 61 * 1000); // the window has passed
    expect((await signInUser(email, PASSWORD, { remoteAddress: "198.51.100.202" })).status).toBe(
      200,
    );
  });

  it("a successful sign-in resets the account's counter", async () => {
    const email = await account();
    for (let i = 0; i < ACCOUNT.points - 1; i++) await signInUser(email, "nope");
    expect((await signInUser(email, PASSWORD)).status).toBe(200);
    for (let i = 0; i < ACCOUNT.points - 1; i++) {
      expect((await signInUser(email, "nope")).status).toBe(401);
    }
    expect((await signInUser(email, PASSWORD)).status).toBe(200);
  });
});

/** A page action's answer: its status and the form-level error line. */
async function answer(run: () => Promise<unknown>): Promise<{ status: number; error: string }> {
  let result: unknown;
  try {
    result = await run();
  } catch (thrown) {
    result = thrown;
  }
  if (result instanceof Response) return { status: result.status, error: await result.text() };
  const wrapped = result as { data?: { error?: string | null }; init?: { status?: number } };
  return { status: wrapped.init?.status ?? 200, error: wrapped.data?.error ?? "" };
}
