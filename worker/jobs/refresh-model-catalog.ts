import { sweepStaleReservations } from "../../app/server/ai/budgets.server.ts";
import { refreshCatalog } from "../../app/server/ai/catalog.server.ts";

// Periodic (AI_CATALOG_REFRESH_CRON): re-lists every configured provider's models and prices,
// and sweeps credit reservations left behind by crashed processes. Idempotent.
export async function refreshModelCatalog() {
  const providers = await refreshCatalog();
  const sweptReservations = await sweepStaleReservations();
  return { providers, sweptReservations };
}
