import type { RequestHandler } from "msw";
import { farcasterHandlers } from "./farcaster.ts";
import { githubHandlers } from "./github.ts";
import { googleHandlers } from "./google-oauth.ts";

// One file per third-party service (payment processor, AI providers, chat apps, …) is added
// here as the areas that call them land.
export const handlers: RequestHandler[] = [
  ...googleHandlers,
  ...githubHandlers,
  ...farcasterHandlers,
];
