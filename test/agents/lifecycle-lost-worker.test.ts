import { afterEach, describe, expect, it, vi } from "vitest";
import * as stopRoute from "../../app/routes/api.instance.$userId.stop.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { getBoss } from "../../app/server/platform/jobs.server.ts";
import { call } from "../helpers/api.ts";
import { ensureUser, sessionCookieFor } from "../helpers/users.ts";

// Issue 52 (the soak): a `stop` answered 500 during the faults (a web killed, the worker killed,
// PostgreSQL restarted). A lifecycle action is "backend unavailable" (502) when its worker died
// or lost the database mid-action, and "database unavailable" (503) when the job cannot even be
// sent; 500 stays for what is neither (decision 0223).

const jobs = vi.hoisted(() => ({ sendFails: undefined as Error | undefined }));
vi.mock("../../app/server/platform/jobs.server.ts", async (importOriginal) => {
  const real = await importOriginal<typeof import("../../app/server/platform/jobs.server.ts")>();
  return {
    ...real,
    sendJob: (...args: Parameters<typeof real.sendJob>) =>
      jobs.sendFails ? Promise.reject(jobs.sendFails) : real.sendJob(...args),
  };
});

afterEach(() => {
  jobs.sendFails = undefined;
});

async function owner(n: string) {
  const userId = `usr_lost_${n}`;
  await ensureUser(userId);
  await db()`insert into instances (id, user_id, container_name, volume_name,
      gateway_token_sealed, observed_state)
    values (${`ins_lost_${n}`}, ${userId}, ${`c_lost_${n}`}, ${`v_lost_${n}`}, 'sealed', 'running')`;
  return { userId, cookie: await sessionCookieFor(userId) };
}

const stop = ({ userId, cookie }: { userId: string; cookie: string }) =>
  call(stopRoute, `/api/instance/${userId}/stop`, {
    method: "POST",
    params: { userId },
    headers: { cookie },
  });

describe("a lifecycle action whose backend went away", () => {
  it("answers 502 when its job was failed because its worker died, not 500", async () => {
    const who = await owner("worker");
    const answer = stop(who);
    // The worker took the job and was killed: the heartbeat monitor fails it (retryLimit 0).
    const boss = await getBoss();
    let jobId: string | undefined;
    await expect
      .poll(async () => {
        const [row] = await db()<{ id: string }[]>`select id::text from pgboss.job
          where name = 'instance-action' and data->>'instanceId' = 'ins_lost_worker'`;
        jobId = row?.id;
        return jobId;
      })
      .toBeDefined();
    await boss.fail("instance-action", jobId!, { message: "heartbeat lost" });
    const res = await answer;
    expect(res.status).toBe(502);
    expect(res.json).toEqual({
      error: "Instance backend unavailable",
      success: false,
      status: "error",
    });
  });

  it("answers 503 when the job cannot be sent because the database is away", async () => {
    const who = await owner("db");
    jobs.sendFails = Object.assign(new Error("write CONNECTION_CLOSED"), {
      code: "CONNECTION_CLOSED",
    });
    const res = await stop(who);
    expect(res.status).toBe(503);
    expect(res.json).toEqual({ error: "Database unavailable; try again shortly" });
  });
});
