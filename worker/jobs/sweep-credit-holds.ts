import { sweepStaleReservations } from "../../app/server/ai/hold-renewal.server.ts";

/** Periodic (every minute): releases credit holds whose process stopped renewing them (0223). */
export async function sweepCreditHoldsJob() {
  return { released: await sweepStaleReservations() };
}
