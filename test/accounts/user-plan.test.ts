import { afterEach, describe, expect, it } from "vitest";
import * as userRoute from "../../app/routes/api.user.ts";
import { assignPlan } from "../../app/server/billing/plan-assignments.server.ts";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import { withoutStripe } from "../billing/support.ts";
import { as, newUser } from "./helpers.ts";

// GET /api/user's `plan` is the plan the user has (the one that hosts their agents), not only
// the processor's: on a self-hosted server that is the default plan or an operator's assignment.

afterEach(() => {
  process.env.DEFAULT_PLAN = "none"; // the test setup's value
  resetEnvCache();
});

const planOf = async (who: { cookie: string }) => {
  const res = await as(who, userRoute, "/api/user");
  expect(res.status).toBe(200);
  return res.json.user.plan as string;
};

describe("GET /api/user plan", () => {
  it("shows the self-hosted default plan, then an operator's assignment, then free under none", async () => {
    await withoutStripe(async () => {
      process.env.DEFAULT_PLAN = "solo";
      resetEnvCache();
      const user = await newUser();
      expect(await planOf(user)).toBe("solo");

      await assignPlan(user.id, "collective", "usr_operator1");
      expect(await planOf(user)).toBe("collective");

      await assignPlan(user.id, "none", "usr_operator1");
      expect(await planOf(user)).toBe("free");

      // Back to the default, which now is `none`: nothing hosts their agents.
      await assignPlan(user.id, "default", "usr_operator1");
      process.env.DEFAULT_PLAN = "none";
      resetEnvCache();
      const res = await as(user, userRoute, "/api/user");
      expect(res.json).toEqual({
        success: true,
        user: {
          id: user.id,
          email: user.email,
          name: user.email,
          plan: "free",
          createdAt: expect.any(String),
        },
      });
    });
  });
});
