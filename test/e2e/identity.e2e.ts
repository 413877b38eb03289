import type { Browser } from "playwright-core";
import { privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchBrowser, type RunningApp, startApp } from "./app.ts";

// "Sign in with Ethereum" on the sign-in page: with JavaScript and an injected wallet (an
// EIP-1193 provider whose signing runs in the test process with a known key), with JavaScript
// but no wallet, and without JavaScript.
let app: RunningApp;
let browser: Browser;
const userAgent =
  "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/140.0.0.0 Safari/537.36";
// anvil's first dev key; an EOA signature is checked without any RPC.
const account = privateKeyToAccount(
  "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
);

beforeAll(async () => {
  app = await startApp();
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
  await app?.stop();
});

describe("Sign in with Ethereum", () => {
  it("signs in with an injected wallet and lands on the settings page", async () => {
    const context = await browser.newContext({ userAgent });
    const page = await context.newPage();
    const errors: string[] = [];
    page.on("pageerror", (e) => errors.push(e.message));
    await page.exposeFunction("__walletRequest", async (method: string, params: unknown[]) => {
      if (method === "eth_requestAccounts" || method === "eth_accounts") {
        return [account.address.toLowerCase()];
      }
      if (method === "eth_chainId") return "0x2105";
      if (method === "personal_sign") return account.signMessage({ message: params[0] as string });
      throw new Error(`unsupported ${method}`);
    });
    await page.addInitScript(() => {
      const w = window as unknown as {
        ethereum: unknown;
        __walletRequest: (m: string, p: unknown[]) => Promise<unknown>;
      };
      w.ethereum = {
        request: ({ method, params }: { method: string; params?: unknown[] }) =>
          w.__walletRequest(method, params ?? []),
      };
    });
    await page.goto(`${app.url}/signin`);
    const button = page.getByRole("button", { name: "Sign in with Ethereum" });
    await expect.poll(() => button.isEnabled()).toBe(true);
    await button.click();
    await expect.poll(() => new URL(page.url()).pathname).toBe("/settings");
    await expect
      .poll(() => page.getByText(`${account.address.toLowerCase()}@wallet.invalid`).count())
      .toBeGreaterThan(0);
    expect(errors).toEqual([]);
    await context.close();
  });

  it("explains that a wallet is needed when there is none, or no JavaScript", async () => {
    for (const javaScriptEnabled of [true, false]) {
      const context = await browser.newContext({ javaScriptEnabled, userAgent });
      const page = await context.newPage();
      await page.goto(`${app.url}/signin`);
      const button = page.getByRole("button", { name: "Sign in with Ethereum" });
      await expect.poll(() => button.isDisabled()).toBe(true);
      const text = javaScriptEnabled ? "No browser wallet found" : "Needs a browser wallet";
      await expect.poll(() => page.getByText(text).isVisible()).toBe(true);
      await context.close();
    }
  });
});
