import { expect, it } from "vitest";
import { goals, type Reply } from "../../bench/density-report.ts";

// The density bench's goal rows (issue 53) decide its exit code for the 100-agent run: a message
// that was never answered must count against "every one of them answering within 5 s p95".

const answered = (ms: number): Reply => ({ state: "awake", ms, ok: true });
const unanswered: Reply = { state: "frozen", ms: 30_000, ok: false, error: "timed out" };

it("counts an unanswered message as later than any bound in the reply percentiles", () => {
  // 18 fast answers and 2 that never came: 10 % unanswered, so p95 misses.
  const replies = [...Array.from({ length: 18 }, () => answered(1_000)), unanswered, unanswered];
  const [p95, p50] = goals({
    replies,
    sleeperSamples: [40 * 1024 ** 2],
    awakeIdleSamples: [500 * 1024 ** 2],
    failedWakes: 0,
  });
  expect(p95).toMatchObject({ name: "message → reply p95", value: "unanswered", met: false });
  expect(p50).toMatchObject({ value: "1.0 s", met: true });
  // All answered: met.
  const all = goals({
    replies: Array.from({ length: 20 }, () => answered(1_000)),
    sleeperSamples: [40 * 1024 ** 2],
    awakeIdleSamples: [500 * 1024 ** 2],
    failedWakes: 0,
  });
  expect(all.every((g) => g.met)).toBe(true);
});

it("misses every goal it has no figure for (nothing measured is not a pass)", () => {
  const list = goals({ replies: [], sleeperSamples: [], awakeIdleSamples: [], failedWakes: 0 });
  expect(list.filter((g) => !g.met).map((g) => g.name)).toEqual([
    "message → reply p95",
    "message → reply p50",
    "RAM per sleeper (worst sample's mean)",
    "RAM per awake idle agent (every sample)",
  ]);
});
