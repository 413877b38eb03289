import { refreshCatalog } from "../../app/server/ai/catalog.server.ts";

// Periodic (AI_CATALOG_REFRESH_CRON): re-lists every configured provider's models and prices.
// Idempotent. (Credit holds of dead processes have their own job: sweep-credit-holds.)
export async function refreshModelCatalog() {
  return { providers: await refreshCatalog() };
}
