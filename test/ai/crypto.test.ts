import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  resetSealingKeyCache,
  seal,
  sealingKey,
  unseal,
} from "../../app/server/platform/crypto.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { secrets } from "../../app/server/platform/secrets.server.ts";

describe("secret sealing (AES-256-GCM)", () => {
  let dir: string;
  const original = process.env.DATA_DIR;

  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), "sealing-"));
    process.env.DATA_DIR = dir;
    delete process.env.SEALING_KEY;
    resetEnvCache();
    resetSealingKeyCache();
  });

  afterEach(async () => {
    process.env.DATA_DIR = original;
    delete process.env.SEALING_KEY;
    resetEnvCache();
    resetSealingKeyCache();
    await rm(dir, { recursive: true, force: true });
  });

  it("round-trips, with a fresh IV every time", () => {
    const a = seal("sk-secret");
    const b = seal("sk-secret");
    expect(a).not.toBe(b);
    expect(a).toMatch(/^v1\./);
    expect(a).not.toContain("sk-secret");
    expect(unseal(a)).toBe("sk-secret");
    expect(unseal(seal(""))).toBe("");
  });

  it("refuses a tampered or foreign secret", () => {
    const sealed = seal("sk-secret");
    const raw = Buffer.from(sealed.slice(3), "base64url");
    raw[raw.length - 1]! ^= 1;
    expect(() => unseal(`v1.${raw.toString("base64url")}`)).toThrow();
    expect(() => unseal("v2.abc")).toThrow(/format/);
    process.env.SEALING_KEY = "ab".repeat(32);
    resetEnvCache();
    expect(() => unseal(sealed)).toThrow();
  });

  it("uses SEALING_KEY when set", () => {
    process.env.SEALING_KEY = "0f".repeat(32);
    resetEnvCache();
    expect(sealingKey().toString("hex")).toBe("0f".repeat(32));
  });

  it("keeps a local key in DATA_DIR/secrets.json (0600), preserving other fields", async () => {
    const file = path.join(dir, "secrets.json");
    const sessionSecret = "k".repeat(40);
    await writeFile(file, JSON.stringify({ sessionSecret, note: "kept" }));
    const key = sealingKey();
    const saved = JSON.parse(await readFile(file, "utf8"));
    expect(saved).toEqual({ sessionSecret, note: "kept", sealingKey: key.toString("hex") });
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    // A second process (no cache) reads the same key back.
    resetSealingKeyCache();
    expect(sealingKey().equals(key)).toBe(true);
  });

  it("a file holding only the sealing key gets a session secret too, the key kept", async () => {
    // Older versions wrote the sealing key alone when sealing came first; sessions then failed.
    const file = path.join(dir, "secrets.json");
    const sealingKeyHex = "1f".repeat(32);
    await writeFile(file, JSON.stringify({ sealingKey: sealingKeyHex }));
    const local = secrets();
    expect(local.sealingKey).toBe(sealingKeyHex);
    expect(local.sessionSecret.length).toBeGreaterThanOrEqual(32);
    expect(sealingKey().toString("hex")).toBe(sealingKeyHex);
    expect(JSON.parse(await readFile(file, "utf8"))).toEqual(local);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
  });

  it("refuses a secrets file with an invalid field instead of replacing it", async () => {
    await writeFile(path.join(dir, "secrets.json"), JSON.stringify({ sessionSecret: "short" }));
    expect(() => sealingKey()).toThrow(/unreadable or invalid; delete it/);
  });

  it("creates the secrets file when missing", async () => {
    const sealed = seal("x");
    const saved = JSON.parse(await readFile(path.join(dir, "secrets.json"), "utf8"));
    expect(saved.sealingKey).toMatch(/^[0-9a-f]{64}$/);
    resetSealingKeyCache();
    expect(unseal(sealed)).toBe("x");
  });
});
