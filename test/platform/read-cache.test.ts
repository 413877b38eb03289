import { describe, expect, it } from "vitest";
import { db } from "../../app/server/platform/db.server.ts";
import { versionedRead } from "../../app/server/platform/read-cache.server.ts";
import { ensureUser } from "../helpers/users.ts";

// Kept reads (decision 0176) against the real triggers of migration 0098: a kept answer is
// used only while nothing behind it changed, whoever changed it and however it was changed.

/** A read that counts how often the database is really read. */
function counted(userId: string) {
  let reads = 0;
  const read = () =>
    versionedRead(userId, "agents", async () => {
      reads++;
      return db()<{ name: string }[]>`select name from agents where user_id = ${userId}
        order by name`;
    });
  return { read, reads: () => reads };
}

async function agentOf(userId: string, id: string) {
  await db()`insert into agents (id, user_id, name, gateway_agent_id, model, tier)
    values (${id}, ${userId}, ${id}, ${id.replace("_", "-")}, 'openai/gpt-4o-mini', 'starter')`;
}

const version = async (owner: string) => {
  const [row] = await db()<{ v: number }[]>`
    select coalesce(sum(weight), 0)::bigint as v from read_versions where owner_id = ${owner}`;
  return row!.v;
};

describe("versioned reads", () => {
  it("keeps an answer until a change to its rows, by any writer, and never mixes owners", async () => {
    await ensureUser("usr_kept1");
    await ensureUser("usr_kept2");
    await agentOf("usr_kept1", "agt_kept1a");
    const one = counted("usr_kept1");
    const first = await one.read();
    expect(await one.read()).toBe(first); // the same kept rows, not read again
    expect(one.reads()).toBe(1);

    // Another owner's change leaves it kept.
    await agentOf("usr_kept2", "agt_kept2a");
    await one.read();
    expect(one.reads()).toBe(1);

    // A hand-written update (no application code involved) is seen at once.
    await db()`update agents set name = 'renamed' where id = 'agt_kept1a'`;
    expect((await one.read()).map((r) => r.name)).toEqual(["renamed"]);
    expect(one.reads()).toBe(2);
    await db()`delete from agents where id = 'agt_kept1a'`;
    expect(await one.read()).toEqual([]);
  });

  it("keeps an agent's view over an instance's live samples, not over a change of its state", async () => {
    await ensureUser("usr_kept3");
    await agentOf("usr_kept3", "agt_kept3a");
    await db()`insert into instances (id, user_id, container_name, volume_name,
        gateway_token_sealed, observed_state)
      values ('ins_kept3', 'usr_kept3', 'c', 'v', 'sealed', 'running')`;
    const before = await version("usr_kept3");
    await db()`update instances set cpu_percent = 3.5, memory_bytes = 1000, sampled_at = now(),
      updated_at = now() where id = 'ins_kept3'`;
    expect(await version("usr_kept3")).toBe(before);
    await db()`update instances set observed_state = 'crashed' where id = 'ins_kept3'`;
    expect(await version("usr_kept3")).toBeGreaterThan(before);
    // Rows that belong to an instance or an agent count for their owner.
    const step = await version("usr_kept3");
    await db()`insert into instance_progress (instance_id, step) values ('ins_kept3', 'ready')`;
    expect(await version("usr_kept3")).toBeGreaterThan(step);
    const verified = await version("usr_kept3");
    await db()`insert into agent_verifications (agent_id, verification_type)
      values ('agt_kept3a', 'ens')`;
    expect(await version("usr_kept3")).toBeGreaterThan(verified);
  });

  it("rises with every change, across the folding of old versions", async () => {
    await ensureUser("usr_kept4");
    let last = await version("usr_kept4");
    for (let i = 0; i < 150; i++) {
      await db()`insert into credit_ledger (id, user_id, amount_micro_usd, reason, reference)
        values (${`led_kept_${i}`}, 'usr_kept4', 1, 'test', ${`r${i}`})`;
      const now = await version("usr_kept4");
      expect(now).toBe(last + 1);
      last = now;
    }
    // Folded: far fewer rows than changes.
    const [rows] = await db()<{ n: number }[]>`
      select count(*)::int as n from read_versions where owner_id = 'usr_kept4'`;
    expect(rows!.n).toBeLessThan(150);
  });

  it("reads afresh after a TRUNCATE, which names no owner", async () => {
    await ensureUser("usr_kept5");
    await agentOf("usr_kept5", "agt_kept5a");
    const five = counted("usr_kept5");
    await five.read();
    await db()`truncate agent_verifications`;
    await five.read();
    expect(five.reads()).toBe(2);
  });

  it("checks made at once share one statement, each owner gets its own answer, and a change is seen by the next check", async () => {
    const owners = Array.from({ length: 8 }, (_, i) => `usr_batch${i}`);
    for (const owner of owners) {
      await ensureUser(owner);
      await agentOf(owner, `agt_${owner}`);
    }
    const readers = owners.map((owner) => counted(owner));
    const waiting = async () => {
      const [row] = await db()<{ n: number }[]>`
        select count(*)::int as n from pg_stat_activity
        where wait_event_type = 'Lock' and query like '%from read_versions%'`;
      return row!.n;
    };

    // Version statements held by a lock: the first two are sent, every later check waits
    // for the batch after them instead of taking a connection of its own.
    const release = Promise.withResolvers<void>();
    const locked = Promise.withResolvers<void>();
    const holder = db().begin(async (tx) => {
      await tx`lock table read_versions in access exclusive mode`;
      locked.resolve();
      await release.promise;
    });
    await locked.promise;
    const first = [readers[0]!.read(), readers[1]!.read()];
    await Promise.resolve();
    const second = readers.flatMap((r) => [r.read(), r.read(), r.read()]);
    while ((await waiting()) < 2) await new Promise((r) => setImmediate(r));
    for (let i = 0; i < 5; i++) expect(await waiting()).toBeLessThanOrEqual(2);
    release.resolve();
    await holder;
    const answers = await Promise.all([...first, ...second]);
    expect(answers.slice(2).map((rows) => rows[0]!.name)).toEqual(
      owners.flatMap((owner) => [`agt_${owner}`, `agt_${owner}`, `agt_${owner}`]),
    );

    // A change committed before a check is counted by it, whatever else is in flight.
    const readsBefore = readers[4]!.reads();
    await db()`update agents set name = 'changed' where id = 'agt_usr_batch3'`;
    const after = await Promise.all(readers.map((r) => r.read()));
    expect(after[3]![0]!.name).toBe("changed");
    expect(after[4]![0]!.name).toBe("agt_usr_batch4");
    expect(readers[4]!.reads()).toBe(readsBefore); // kept throughout
  });
});
