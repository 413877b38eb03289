import { apiRoute, endpoint } from "../server/api.server.ts";
import { DomainError } from "../server/platform/errors.server.ts";

// The legacy checkout endpoint, retired: it answers 410 naming its replacement.
const gone = endpoint({
  summary: "Retired (410): use GET /api/pay/checkout?plan=<plan_id>",
  auth: "none",
  handler: () => {
    throw new DomainError(
      410,
      "This endpoint is retired: use GET /api/pay/checkout?plan=<plan_id>",
    );
  },
});

export const { loader, action } = apiRoute({ GET: gone, POST: gone });
