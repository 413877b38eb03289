import type { Browser } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import { seal } from "../../app/server/platform/crypto.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { provision } from "../../worker/instances/provision.ts";
import { sessionCookieFor } from "../helpers/users.ts";
import { describeDocker } from "../runtime/docker-support.ts";
import { launchBrowser, type RunningApp } from "./app.ts";
import {
  type GatewayStack,
  REPLY,
  startGatewayStack,
  stopGatewayStack,
  warmUpTurn,
} from "./gateway-stack.ts";

// The chat page in Chromium against the whole stack: the built server (server.ts) listening
// where the gateway container can reach its AI endpoint, a local fake OpenAI-compatible
// provider behind the AI layer, and a real OpenClaw gateway. With JavaScript the reply streams
// over the live agent socket; without it the form post shows the reply.

const USER = "usr_talk_e2e";
const AGENT = "agt_talke2e00000000000";
let stack: GatewayStack | undefined;
let app: RunningApp;
let browser: Browser;

describeDocker("the chat page", () => {
  beforeAll(async () => {
    stack = await startGatewayStack({ user: USER, agent: AGENT });
    app = stack.app;
    const row = stack.row;
    await provision(row.id);
    await warmUpTurn(row.id);
    browser = await launchBrowser();
  }, 300_000);

  afterAll(async () => {
    await browser?.close();
    await stopGatewayStack(stack);
  });

  async function open(javaScriptEnabled: boolean, tab = "chat") {
    const context = await browser.newContext({ javaScriptEnabled });
    const cookie = (await sessionCookieFor(USER)).split("=");
    await context.addCookies([
      { name: cookie[0]!, value: cookie.slice(1).join("="), url: app.url },
    ]);
    const page = await context.newPage();
    await page.goto(`${app.url}/agents/${AGENT}/${tab}`);
    return { context, page };
  }

  it("streams the reply over the live socket with JavaScript on", async () => {
    const { context, page } = await open(true);
    const frames: string[] = [];
    page.on("websocket", (ws) => ws.on("framereceived", (f) => frames.push(String(f.payload))));
    await expect
      .poll(() => page.getByRole("heading", { level: 1 }).textContent())
      .toBe("Chat with Pal");
    // Wait for hydration: the socket path is only taken once React runs.
    await page.waitForFunction(() => (window as { __remixContext?: unknown }).__remixContext);
    await page.waitForLoadState("networkidle");
    await expect
      .poll(() => page.getByLabel("Message").count())
      .toBe(1)
      .catch(async (error: Error) => {
        throw new Error(`${error.message}\n${await page.content().catch(String)}`);
      });
    await page.getByLabel("Message").fill("Hello over the socket");
    await page.getByRole("button", { name: "Send" }).click();
    const assistant = page.locator('[data-testid="messages"] [data-role="assistant"]');
    await expect
      .poll(
        async () => ({
          replies: await assistant.allTextContents(),
          // On failure, what the socket said and what the page shows.
          frames: frames.filter((f) => !f.includes('"type":"event"')).slice(-5),
          page: (await page.locator("main").textContent())?.slice(0, 400),
        }),
        { timeout: 120_000 },
      )
      .toMatchObject({ replies: expect.arrayContaining([REPLY]) });
    // Pieces (delta frames) come only when the gateway's run takes long enough to emit them;
    // test/agents/talk-real.test.ts checks the piece-by-piece stream. Here: the page got the
    // socket's final frame.
    await expect.poll(() => frames.some((f) => f.includes('"type":"final"'))).toBe(true);
    await expect
      .poll(() => page.getByTestId("memory").textContent(), { timeout: 30_000 })
      .toContain("Hello over the socket");
    await context.close();
  }, 180_000);

  it("shows the reply after a plain form post with JavaScript off", async () => {
    const { context, page } = await open(false);
    await page.getByLabel("Message").fill("Hello without scripts");
    await page.getByRole("button", { name: "Send" }).click();
    // The post's answer is a new document (it comes once the turn is done): poll that page, since
    // a load state right after the click can resolve on the page being left.
    const messages = () => page.locator('[data-testid="messages"] [data-role]').allTextContents();
    await expect.poll(messages, { timeout: 120_000 }).toContain("Hello without scripts");
    await expect.poll(messages, { timeout: 120_000 }).toContain(REPLY);
    await context.close();
  }, 180_000);

  it("plays the agent's live stream: natively, else through hls.js", async () => {
    await db()`insert into live_streams (user_id, provider, live_stream_id, playback_id, stream_key_sealed)
      values (${USER}, 'mux', 'ls_e2e', 'pb_e2e', ${seal("sk-e2e")})
      on conflict (user_id) do nothing`;
    const playlist = "https://stream.mux.com/pb_e2e.m3u8";
    const player = async (nativeHls: boolean) => {
      // The live stream is on the channels tab.
      const { context, page } = await open(true, "channels");
      if (!nativeHls) {
        // A browser without native HLS (Firefox, older Chromium), as far as the page can tell.
        await page.addInitScript(() => {
          const canPlayType = HTMLMediaElement.prototype.canPlayType;
          HTMLMediaElement.prototype.canPlayType = function (type: string) {
            return /mpegurl/i.test(type) ? "" : canPlayType.call(this, type);
          };
        });
      }
      // stream.mux.com cannot be reached from here: the test serves a live playlist whose
      // segment is not there yet.
      const manifests: string[] = [];
      await page.route("https://stream.mux.com/**", (route) => {
        const url = route.request().url();
        if (!url.endsWith(".m3u8")) return route.fulfill({ status: 404, body: "" });
        manifests.push(url);
        return route.fulfill({
          contentType: "application/vnd.apple.mpegurl",
          body: "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXTINF:2.0,\nseg0.ts\n",
        });
      });
      await page.reload({ waitUntil: "domcontentloaded" });
      await page.waitForFunction(() => (window as { __remixContext?: unknown }).__remixContext);
      const video = page.getByTestId("stream").locator("video");
      return { context, page, video, manifests };
    };

    const native = await player(true);
    if (
      await native.video.evaluate((v: HTMLVideoElement) =>
        v.canPlayType("application/vnd.apple.mpegurl"),
      )
    ) {
      await expect.poll(() => native.video.getAttribute("data-player")).toBe("native");
      await expect.poll(() => native.manifests).toContain(playlist);
    }
    await native.context.close();

    const viaHlsJs = await player(false);
    await expect
      .poll(() => viaHlsJs.video.getAttribute("data-player"), { timeout: 30_000 })
      .not.toBe("native");
    await expect.poll(() => viaHlsJs.manifests, { timeout: 30_000 }).toContain(playlist);
    // hls.js feeds the element through (Managed) Media Source: it plays a blob URL.
    await expect
      .poll(() => viaHlsJs.video.evaluate((v: HTMLVideoElement) => v.currentSrc || v.src))
      .toMatch(/^blob:/);
    await viaHlsJs.context.close();

    // Without JavaScript the page still names the stream for a browser that plays HLS itself.
    const plain = await open(false, "channels");
    const source = plain.page.getByTestId("stream").locator("video source");
    await expect.poll(() => source.getAttribute("src")).toBe(playlist);
    await plain.context.close();
  }, 120_000);
});
