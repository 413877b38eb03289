import { redirect } from "@remix-run/node";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { DomainError } from "../../app/server/platform/errors.server.ts";
import { formAction } from "../../app/server/platform/form-action.server.ts";

// The page-action helper: conform replies with 400 on bad input, the API's DomainError
// statuses, errors of fields a page does not show moved onto the form, redirects passed on.

const action = formAction({
  schema: z.discriminatedUnion("intent", [
    z.object({ intent: z.literal("rename"), name: z.string().min(3, "too short") }),
    z.object({ intent: z.literal("move"), to: z.string() }),
    z.object({ intent: z.literal("fail"), status: z.coerce.number() }),
    z.object({ intent: z.literal("db-away") }),
  ]),
  access: () => ({ userId: "usr_1" }),
  fields: ["name"],
  resetForm: ["rename"],
  handler: ({ value, session }) => {
    if (value.intent === "move") return redirect(value.to, 303);
    if (value.intent === "db-away") {
      // What postgres.js throws for a session PostgreSQL ended (a restart, a failover).
      throw Object.assign(new Error("terminating connection due to administrator command"), {
        code: "57P01",
      });
    }
    if (value.intent === "fail") {
      throw new DomainError(value.status, value.status === 409 ? "name: taken" : "Nope");
    }
    return { renamed: `${session.userId}:${value.name}` };
  },
});

async function post(form: Record<string, string>) {
  const request = new Request("http://localhost/page", {
    method: "POST",
    body: new URLSearchParams(form),
  });
  try {
    const answer = await action({ request, params: {}, context: {} });
    return { status: answer.init?.status ?? 200, body: answer.data };
  } catch (thrown) {
    if (thrown instanceof Response) return { status: thrown.status, response: thrown };
    throw thrown;
  }
}

describe("formAction", () => {
  it("answers the handler's value with a success reply (reset for the listed intents)", async () => {
    const ok = await post({ intent: "rename", name: "Ada" });
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({
      intent: "rename",
      error: null,
      value: { renamed: "usr_1:Ada" },
    });
    expect(ok.body?.result).toMatchObject({ initialValue: null });
  });

  it("answers invalid input with 400 and conform's reply; unshown fields go to the form", async () => {
    const short = await post({ intent: "rename", name: "A" });
    expect(short.status).toBe(400);
    expect(short.body?.result.error).toEqual({ name: ["too short"] });
    expect(short.body?.value).toBeNull();
    const hidden = await post({ intent: "move" });
    expect(hidden.status).toBe(400);
    expect(hidden.body?.error).toMatch(/^to: /);
    const unknown = await post({ intent: "explode" });
    expect([unknown.status, unknown.body?.error]).toEqual([400, "Unknown action"]);
  });

  it("maps DomainErrors like the API route builder, onto the field when it names one", async () => {
    const conflict = await post({ intent: "fail", status: "409" });
    expect(conflict.status).toBe(409);
    expect(conflict.body?.result.error).toEqual({ name: ["taken"] });
    const payment = await post({ intent: "fail", status: "402" });
    expect([payment.status, payment.body?.error]).toEqual([402, "Nope"]);
    const bogus = await post({ intent: "fail", status: "200" });
    expect(bogus.status).toBe(500);
  });

  it("passes a redirect on to Remix", async () => {
    const moved = await post({ intent: "move", to: "/elsewhere" });
    expect(moved.status).toBe(303);
    expect(moved.response?.headers.get("location")).toBe("/elsewhere");
  });

  it("answers a database that is away with 503 on the form, not the error page", async () => {
    const away = await post({ intent: "db-away" });
    expect(away.status).toBe(503);
    expect(away.body?.error).toBe("Database unavailable; try again shortly");
    expect(away.body?.value).toBeNull();
  });
});
