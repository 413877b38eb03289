import { describe, expect, it } from "vitest";
import {
  costMicroUsd,
  costUsd,
  estimateUsd,
  priceToUsdPerToken,
  usdPerMillionToPrice,
  usdPerTokenToPrice,
} from "../../app/server/ai/money.server.ts";

// Hand-computed figures. Prices are kept as micro-USD per 1M tokens (= pico-USD per token).
describe("AI money arithmetic", () => {
  const gpt4o = { prompt: usdPerMillionToPrice("2.50"), completion: usdPerMillionToPrice("10.00") };
  const mini = { prompt: usdPerMillionToPrice("0.15"), completion: usdPerMillionToPrice("0.60") };

  it("parses vendor prices per million and OpenRouter prices per token to the same unit", () => {
    expect(gpt4o.prompt).toBe(2_500_000n);
    expect(usdPerTokenToPrice("0.0000025")).toBe(2_500_000n);
    expect(usdPerTokenToPrice("0.00001")).toBe(gpt4o.completion);
    expect(usdPerTokenToPrice("0.000000038")).toBe(38_000n);
    expect(usdPerTokenToPrice("0")).toBe(0n);
    expect(usdPerTokenToPrice("3e-6")).toBe(3_000_000n);
    expect(usdPerMillionToPrice("0.075")).toBe(75_000n);
  });

  it("shows prices per token, divided by a million exactly once", () => {
    // $2.50 per 1M tokens is 0.0000025 USD per token — not 2.5e-12 (divided twice), not 2.5.
    expect(priceToUsdPerToken(gpt4o.prompt)).toBe(0.0000025);
    expect(priceToUsdPerToken(gpt4o.completion)).toBe(0.00001);
    expect(priceToUsdPerToken(mini.prompt)).toBe(0.00000015);
    // A million prompt tokens of GPT-4o cost $2.50.
    expect(costUsd(gpt4o, 1_000_000, 0)).toBe(2.5);
    expect(costMicroUsd(gpt4o, 1_000_000, 0)).toBe(2_500_000);
  });

  it("computes exact costs in integer micro-USD", () => {
    // 1234 × 2.5e-6 + 567 × 1e-5 = 0.003085 + 0.00567 = 0.008755 USD
    expect(costMicroUsd(gpt4o, 1234, 567)).toBe(8755);
    expect(costUsd(gpt4o, 1234, 567)).toBe(0.008755);
    // Claude Sonnet 4: 1000 × 3e-6 + 500 × 1.5e-5 = 0.0105 USD
    const sonnet = { prompt: usdPerMillionToPrice("3"), completion: usdPerMillionToPrice("15") };
    expect(costMicroUsd(sonnet, 1000, 500)).toBe(10_500);
    // Sub-micro costs round up once, over the whole call: 7 × 0.15 + 3 × 0.6 = 2.85 µUSD → 3.
    expect(costUsd(mini, 7, 3)).toBe(0.00000285);
    expect(costMicroUsd(mini, 7, 3)).toBe(3);
    expect(costMicroUsd(mini, 0, 0)).toBe(0);
    // Large counts stay exact (no float drift): 123,456,789 prompt tokens of GPT-4o.
    expect(costMicroUsd(gpt4o, 123_456_789, 0)).toBe(308_641_973);
  });

  it("estimates fractional token counts too", () => {
    expect(estimateUsd(gpt4o, 0.5, 0)).toBeCloseTo(0.00000125, 15);
    expect(estimateUsd(gpt4o, 10, 10)).toBe(0.000125);
  });
});
