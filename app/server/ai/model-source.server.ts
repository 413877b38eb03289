import { creditBalance } from "../accounts/credits.server.ts";
import { userKeyProviders } from "./byok.server.ts";
import type { ProviderName } from "./providers/shared.server.ts";
import { configuredProviders } from "./providers.server.ts";

// Where an agent's model calls would go, so the agent page can say what is missing before the
// first chat fails: the server's providers (a key in the environment, or a local
// OpenAI-compatible server at a non-vendor base URL) and the user's own keys (BYOK).

export interface ModelSource {
  /** The server's providers; `local` when a base URL other than the vendor's serves it. */
  platform: Array<{ provider: ProviderName; local: boolean }>;
  /** Providers the user added a key for. */
  ownKeys: ProviderName[];
  /** Credits (USD) that pay for calls through the server's providers. */
  credits: number;
  /** What stops model calls, in words, or null when nothing does. */
  problem: { kind: "no-provider" | "no-credits"; message: string } | null;
}

export async function modelSource(userId: string): Promise<ModelSource> {
  const platform = configuredProviders().map((c) => ({
    provider: c.name,
    local: c.custom && !c.apiKey,
  }));
  const [keys, credits] = await Promise.all([userKeyProviders(userId), creditBalance(userId)]);
  const ownKeys = keys.map((k) => k.provider);
  let problem: ModelSource["problem"] = null;
  if (platform.length === 0 && ownKeys.length === 0) {
    problem = {
      kind: "no-provider",
      message:
        "No model source is set, so the agent cannot answer: this server has no AI provider key " +
        "(OPENAI_API_KEY, ANTHROPIC_API_KEY, GOOGLE_API_KEY or OPENROUTER_API_KEY), no local " +
        "OpenAI-compatible server (OPENAI_BASE_URL), and you have added no key of your own. " +
        "Add your key on the billing page, or ask the operator to configure a provider.",
    };
  } else if (ownKeys.length === 0 && credits <= 0 && !platform.some((p) => p.local)) {
    problem = {
      kind: "no-credits",
      message: `Model calls through this server's providers (${platform.map((p) => p.provider).join(", ")}) are paid from credits, and you have none: buy or ask for credits, or add your own key on the billing page.`,
    };
  }
  return { platform, ownKeys, credits, problem };
}
