import type { DomainError } from "../platform/errors.server.ts";
import { errorResponse } from "../platform/http.server.ts";

// How the gateway's model endpoint says "no credits" (decision 0155). OpenClaw classifies a 402
// by its text: "billing" (its default, and any of "insufficient credits", "credit balance",
// "spend limit", "top up"…) disables the provider's key for minutes, so credits granted right
// after would not help. "usage limit" with "try again" is a passing limit instead: nothing is
// disabled, a long window is not retried in a loop, and a text naming a "plan" or "resets" goes
// to the chat as it is ("⚠️ " + message; in quotes, as the gateway's OpenAI client renders a
// string `error`).

const OUT_OF_CREDITS =
  "Out of credits: the usage limit of your plan is reached and no credits are left. Add credits on the Billing page (or ask this server's operator), then try again.";
const dailyLimit = (usd: unknown) =>
  `Out of today's AI allowance: the daily usage limit of $${String(usd)} is reached. It resets at midnight UTC; try again then, or ask for a higher limit.`;

/** The 402 answered to a gateway for a refused call (no credits, or the daily limit). */
export function creditRefusal(error: DomainError): Response {
  const daily = typeof error.extra?.dailyLimitUsd === "number";
  return errorResponse(
    402,
    daily ? dailyLimit(error.extra?.dailyLimitUsd) : OUT_OF_CREDITS,
    error.extra,
  );
}

/** The refusal above inside a gateway's error text (which adds "⚠️ " or quotes), if there. */
export function creditRefusalIn(text: string | undefined): string | undefined {
  return /Out of (?:credits|today's AI allowance): [^"]*/.exec(text ?? "")?.[0].trim();
}
