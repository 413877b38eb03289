import { instanceParams, ownUserId } from "../agents/instances.server.ts";
import type { MessageFigures } from "../agents/message-figures.server.ts";
import { microToUsd } from "../ai/money.server.ts";
import type { UsageFigures } from "../ai/usage.server.ts";

// What the metrics endpoints share: the path's user (the caller's own, else 404), the smallest
// population the platform's figures are published or compared against, and the views of the
// message and AI figures (numbers with their unit in the name; money in USD at this edge).
// docs/decisions/0092-metrics-endpoints.md

/**
 * Platform-wide activity figures (the public /api/metrics) and comparisons with the platform's
 * medians (summary) are withheld below this many active users: with fewer, an aggregate comes
 * too close to one user's own figures.
 */
export const MIN_POPULATION = 5;

export const metricsParams = instanceParams;

/** The path's user id when it is the caller's; 404 `{error: "User not found"}` otherwise. */
export const ownMetricsUser = (pathUserId: string, callerId: string) =>
  ownUserId(pathUserId, callerId, "User");

/** A percentage with two decimals (null stays null). */
export const percent = (n: number | null) => (n == null ? null : Math.round(n * 100) / 100);

export function messagesView(f: MessageFigures) {
  return {
    received: f.processed,
    answered: f.answered,
    averageResponseMs: f.averageResponseMs,
    successRate: percent(f.successRate),
    errorRate: percent(f.successRate == null ? null : 100 - f.successRate),
  };
}

export function aiView(f: UsageFigures) {
  return {
    calls: f.calls,
    failed: f.failed,
    errorRate: percent(f.errorRate),
    promptTokens: f.promptTokens,
    completionTokens: f.completionTokens,
    tokens: f.promptTokens + f.completionTokens,
    costUsd: microToUsd(f.costMicroUsd),
    latencyMs: f.latencyMs,
  };
}
