import { resetEnvCache } from "../../app/server/platform/env.server.ts";
import {
  createStripeFake,
  STRIPE_TEST_KEY,
  STRIPE_TEST_WEBHOOK_SECRET,
  testPrices,
} from "../msw/handlers/stripe.ts";
import { mswServer } from "../msw/server.ts";

/** Configures Stripe for this test file (key, webhook secret, prices) and installs the fake. */
export function useStripe() {
  process.env.STRIPE_SECRET_KEY = STRIPE_TEST_KEY;
  process.env.STRIPE_WEBHOOK_SECRET = STRIPE_TEST_WEBHOOK_SECRET;
  Object.assign(process.env, testPrices);
  resetEnvCache();
  const fake = createStripeFake();
  mswServer.use(...fake.handlers);
  return fake;
}

/** Drops the Stripe configuration (the "not configured" answers). */
export function withoutStripe<T>(fn: () => Promise<T>): Promise<T> {
  const saved = { key: process.env.STRIPE_SECRET_KEY, secret: process.env.STRIPE_WEBHOOK_SECRET };
  delete process.env.STRIPE_SECRET_KEY;
  delete process.env.STRIPE_WEBHOOK_SECRET;
  resetEnvCache();
  return fn().finally(() => {
    if (saved.key) process.env.STRIPE_SECRET_KEY = saved.key;
    if (saved.secret) process.env.STRIPE_WEBHOOK_SECRET = saved.secret;
    resetEnvCache();
  });
}

/** The checkout session id at the end of a fake Checkout URL. */
export const sessionIdOf = (url: string) => url.split("/").pop()!;
