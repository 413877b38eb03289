import { errorResponse } from "../server/platform/http.server.ts";

// The legacy checkout endpoint, retired: every method answers 410 naming its replacement.
const gone = () =>
  errorResponse(410, "This endpoint is retired: use GET /api/pay/checkout?plan=<plan_id>");

export const loader = gone;
export const action = gone;
