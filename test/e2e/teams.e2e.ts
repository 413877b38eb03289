import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { InstanceRow } from "../../app/server/agents/instances.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { getBoss, type JobName, type JobPayload } from "../../app/server/platform/jobs.server.ts";
import { provisionInstance } from "../../worker/jobs/provision-instance.ts";
import { sendEmail } from "../../worker/jobs/send-email.ts";
import { startSmtpInbox } from "../helpers/smtp-inbox.ts";
import { sessionCookieFor } from "../helpers/users.ts";
import { describeDocker } from "../runtime/docker-support.ts";
import { launchBrowser } from "./app.ts";
import {
  type GatewayStack,
  REPLY,
  startGatewayStack,
  stopGatewayStack,
  warmUpTurn,
} from "./gateway-stack.ts";

// Issue 48's run-through "tried as a new user would", in Chromium: the owner creates an
// organisation, provisions its agent and invites a colleague (JavaScript off, the plainest
// browser); the invitation mail arrives through a real SMTP server; the colleague signs up
// through its link, switches to the organisation, sees its agent and chats with it (a form post,
// then the live socket with JavaScript on); the owner removes them and at once their open socket
// closes, their page answers 404 and so does the API. No worker runs: this process does the
// worker's jobs (mail, provisioning) when the test reaches them. One real OpenClaw gateway, the
// organisation's (the stack's own agent is never provisioned).

const OWNER = "usr_teams_e2e_owner";
const COLLEAGUE = "colleague-teams-e2e@example.com";
// A person's browser: sign-up turns away headless user agents (bot detection).
const userAgent =
  "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/140.0.0.0 Safari/537.36";
let stack: GatewayStack | undefined;
let smtp: Awaited<ReturnType<typeof startSmtpInbox>> | undefined;
let browser: Browser;

/** Runs the queued jobs of `name` as the worker would (no worker runs here). */
async function runJobs<N extends JobName>(
  name: N,
  handler: (payload: JobPayload<N>) => Promise<unknown>,
): Promise<number> {
  const boss = await getBoss();
  let ran = 0;
  for (;;) {
    const jobs = await boss.fetch<JobPayload<N>>(name);
    if (!jobs?.length) return ran;
    for (const job of jobs) {
      await handler(job.data);
      await boss.complete(name, job.id);
      ran++;
    }
  }
}

const heading = (page: Page) => page.getByRole("heading", { level: 1 }).textContent();
const mainText = (page: Page) => page.locator("main").textContent();

describeDocker("teams: a colleague joins, chats with the shared agent and is removed", () => {
  beforeAll(async () => {
    smtp = await startSmtpInbox();
    process.env.SMTP_URL = smtp.url;
    resetEnvCache();
    stack = await startGatewayStack({
      user: OWNER,
      agent: "agt_teamse2eunused0000",
      // The server mails through the inbox too; the provision form answers without waiting for
      // the job (this process runs it).
      appEnv: { SMTP_URL: smtp.url, AGENT_PROVISION_WAIT_MS: "0" },
    });
    browser = await launchBrowser();
  }, 300_000);

  afterAll(async () => {
    await browser?.close();
    await stopGatewayStack(stack);
    await smtp?.close();
    delete process.env.SMTP_URL;
  });

  it("owner creates and shares; the colleague signs up, switches, chats and is cut off", async () => {
    const app = stack!.app;
    const owner = await browser.newContext({ javaScriptEnabled: false, userAgent });
    const cookie = (await sessionCookieFor(OWNER)).split("=");
    await owner.addCookies([{ name: cookie[0]!, value: cookie.slice(1).join("="), url: app.url }]);
    const page = await owner.newPage();
    await page.goto(`${app.url}/organizations`);
    await page.getByLabel("Name").fill("Teams Co");
    await page.getByRole("button", { name: "Create organisation" }).click();
    await expect.poll(() => heading(page)).toBe("Teams Co");
    const org = new URL(page.url()).pathname.split("/").pop() as string;
    expect(org).toMatch(/^org_/);

    // Its plan (two seats) and credits: the payment processor's part, tested in billing.
    await db()`insert into subscriptions (id, user_id, stripe_customer_id, kind, item, price_id,
        status) values ('sub_teams_e2e', ${org}, 'cus_teams_e2e', 'plan', 'collective',
        'price_collective', 'active')`;
    await db()`update users set plan = 'collective' where id = ${org}`;
    await db()`insert into credit_ledger (id, user_id, amount_micro_usd, reason, reference)
      values ('led_teams_e2e', ${org}, 5000000, 'test grant', 'led_teams_e2e')`;

    // The owner switches to the organisation and provisions its agent from the agents page.
    await page.goto(`${app.url}/agents`);
    await page.getByLabel("Acting for").selectOption({ value: org });
    await page.getByRole("button", { name: "Switch" }).click();
    await expect.poll(() => mainText(page)).toContain("Teams Co's agents");
    await page.getByLabel("Name").fill("Team Pal");
    await page.getByRole("button", { name: "Provision agent" }).click();
    await expect.poll(() => new URL(page.url()).pathname).toMatch(/^\/agents\/agt_/);
    const agent = new URL(page.url()).pathname.split("/")[2] as string;
    // The worker's part: the organisation's gateway, then a first turn (warmUpTurn).
    expect(await runJobs("provision-instance", provisionInstance)).toBe(1);
    const instance = (await db()<InstanceRow[]>`select * from instances where user_id = ${org}`)[0];
    await warmUpTurn(instance!.id);
    // That turn was driven past the platform, as a channel message or a heartbeat is: its calls
    // name the agent through the gateway config (decision 0225), and no person. (A first run
    // that raced the agents' config reload and failed may have called without it.)
    const unattended = () => db()<{ agent_id: string | null; acting_user_id: string | null }[]>`
      select agent_id, acting_user_id from ai_usage where user_id = ${org}`;
    await expect.poll(unattended).toContainEqual({ agent_id: agent, acting_user_id: null });
    expect((await unattended()).filter((u) => u.acting_user_id !== null)).toEqual([]);

    // The owner invites a colleague; the mail goes out through SMTP.
    await page.goto(`${app.url}/organizations/${org}`);
    await page.getByLabel("Email").fill(COLLEAGUE);
    await page.getByLabel("Role", { exact: true }).selectOption("member");
    await page.getByRole("button", { name: "Send invitation" }).click();
    await expect.poll(() => mainText(page)).toContain(COLLEAGUE);
    expect(await runJobs("send-email", sendEmail)).toBeGreaterThan(0);
    const mail = smtp!.inbox.find((m) => m.text?.includes("/invitations/"));
    expect(mail?.subject).toContain("Teams Co");
    const link = /https?:\/\/\S+\/invitations\/[A-Za-z0-9_-]+/.exec(mail?.text ?? "")?.[0];
    expect(link).toBeTruthy();

    // The colleague follows the link and creates their account: it joins the organisation.
    const colleague = await browser.newContext({ javaScriptEnabled: false, userAgent });
    const them = await colleague.newPage();
    await them.goto(`${app.url}${new URL(link!).pathname}`);
    await expect.poll(() => heading(them)).toBe("Join Teams Co");
    await them.getByRole("link", { name: "create the account" }).click();
    await expect.poll(() => heading(them)).toBe("Create your account");
    await them.getByLabel("Password").fill("correct horse battery staple");
    await them.getByLabel("Name (optional)").fill("Colleague");
    await them.getByRole("button", { name: "Create account" }).click();
    await expect.poll(() => them.getByLabel("Acting for").count()).toBe(1);

    // Their own space has no agent; the organisation's has the shared one.
    await them.goto(`${app.url}/agents`);
    const switchTo = async (value: string) => {
      await them.getByLabel("Acting for").selectOption({ value });
      await them.getByRole("button", { name: "Switch" }).click();
    };
    await switchTo("personal");
    await expect.poll(() => mainText(them)).toContain("No agents yet");
    await switchTo(org);
    await expect.poll(() => mainText(them)).toContain("Team Pal");

    // And chats with it: a plain form post first.
    await them.getByRole("link", { name: "Team Pal" }).click();
    await expect.poll(() => heading(them)).toBe("Chat with Team Pal");
    await them.getByLabel("Message").fill("Hello from a colleague");
    await them.getByRole("button", { name: "Send" }).click();
    const messages = () => them.locator('[data-testid="messages"] [data-role]').allTextContents();
    await expect.poll(messages, { timeout: 120_000 }).toContain("Hello from a colleague");
    await expect.poll(messages, { timeout: 120_000 }).toContain(REPLY);

    // Then with JavaScript on, over the live socket, which stays open.
    const live = await browser.newContext({ javaScriptEnabled: true, userAgent });
    await live.addCookies(await colleague.cookies());
    const chat = await live.newPage();
    let socketClosed: number | undefined;
    const sockets: string[] = [];
    chat.on("websocket", (ws) => {
      sockets.push(ws.url());
      ws.on("close", () => {
        socketClosed ??= Date.now();
      });
    });
    await chat.goto(`${app.url}/agents/${agent}/chat`);
    await chat.waitForFunction(() => (window as { __remixContext?: unknown }).__remixContext);
    await chat.getByLabel("Message").fill("Hello over the socket");
    await chat.getByRole("button", { name: "Send" }).click();
    const replies = chat.locator('[data-testid="messages"] [data-role="assistant"]');
    await expect.poll(() => replies.allTextContents(), { timeout: 120_000 }).toContain(REPLY);
    expect(sockets.some((u) => u.includes(`/agent/${org}`))).toBe(true);
    expect(socketClosed).toBeUndefined();
    // The organisation's spend names the colleague and the agent for the gateway's calls.
    const [person] = await db()<{ id: string }[]>`select id from users where email = ${COLLEAGUE}`;
    const attributed = () => db()<{ n: number }[]>`select count(*)::int as n from ai_usage
      where user_id = ${org} and acting_user_id = ${person!.id} and agent_id = ${agent}`;
    await expect.poll(async () => (await attributed())[0]?.n).toBeGreaterThan(0);

    // The owner removes them: the socket closes, the page and the API answer 404 at once.
    await page.goto(`${app.url}/organizations/${org}`);
    const removedAt = Date.now();
    await page.getByRole("button", { name: "Remove Colleague" }).click();
    await expect.poll(() => mainText(page)).not.toContain(COLLEAGUE);
    await expect.poll(() => socketClosed, { timeout: 5_000 }).toBeDefined();
    process.stdout.write(
      `teams e2e: the removed colleague's socket closed ${socketClosed! - removedAt} ms after the click\n`,
    );
    const again = await them.goto(`${app.url}/agents/${agent}/chat`);
    expect(again?.status()).toBe(404);
    const sessionCookie = (await colleague.cookies()).map((c) => `${c.name}=${c.value}`).join("; ");
    const api = await fetch(`${app.url}/api/agents/${agent}`, {
      headers: { cookie: sessionCookie, "X-Organization": org },
    });
    expect(api.status).toBe(404);
    await live.close();
    await colleague.close();
    await owner.close();
  }, 900_000);
});
