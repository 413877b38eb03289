import { env } from "../platform/env.server.ts";
import { logger } from "../platform/logger.server.ts";
import type { ProviderName } from "./providers/shared.server.ts";

// A provider that fails AI_COOLDOWN_FAILURES times in a row (after its retries) is skipped for
// AI_COOLDOWN_SECONDS; the first call after that is a trial, and one success clears the count.
// State is per process: each web replica learns on its own, within a few calls
// (docs/decisions/0021-ai-provider-routing.md).

interface State {
  failures: number;
  until: number;
}

const states = new Map<ProviderName, State>();

export function isCoolingDown(provider: ProviderName, now = Date.now()): boolean {
  const s = states.get(provider);
  return s !== undefined && s.until > now;
}

/** Epoch ms at which the provider's cool-down ends (0 when it is not cooling down). */
export function coolingUntil(provider: ProviderName): number {
  return states.get(provider)?.until ?? 0;
}

export function recordFailure(provider: ProviderName, now = Date.now()): void {
  const { AI_COOLDOWN_FAILURES, AI_COOLDOWN_SECONDS } = env();
  const s = states.get(provider) ?? { failures: 0, until: 0 };
  s.failures += 1;
  if (s.failures >= AI_COOLDOWN_FAILURES) {
    s.until = now + AI_COOLDOWN_SECONDS * 1000;
    s.failures = 0;
    logger().warn({ provider, seconds: AI_COOLDOWN_SECONDS }, "AI provider cooled down");
  }
  states.set(provider, s);
}

export function recordSuccess(provider: ProviderName): void {
  states.delete(provider);
}

export function resetCooldowns(): void {
  states.clear();
}
