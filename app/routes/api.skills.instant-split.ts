import { z } from "zod";
import { apiRoute, endpoint } from "../server/api.server.ts";
import {
  defineSplit,
  defineSplitSchema,
  executeSplit,
  executeSplitSchema,
  executionIdSchema,
  getExecution,
  listSplits,
} from "../server/payments/splits.server.ts";
import { json } from "../server/platform/http.server.ts";

// Instant royalty splits from the caller's hosted wallet: docs/decisions/0126-instant-splits.md

const execution =
  "`{execution: {id, splitId, amount, token, status (completed|pending|failed|created), paid, remaining, remainderRule, createdAt, legs: [{leg, address, bps, amount, status, hash, attempts: [{attempt, from, to, amount, status, hash, blockNumber, error}]}]}}`";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "Your splits and their executions",
    description: `\`{splits: [{id, name, recipients: [{address, bps}], createdAt}], executions: [...]}\` (the 20 latest executions); with \`?executionId=\` one execution: ${execution}, 404 when it is not yours.`,
    auth: "user",
    rateLimit: "payments",
    query: z.object({ executionId: executionIdSchema.optional() }),
    handler: ({ auth, query }) =>
      query.executionId ? getExecution(auth.user.id, query.executionId) : listSplits(auth.user.id),
  }),
  POST: endpoint({
    summary: "Define a split, or execute one from your hosted wallet",
    description: `\`{action: "define", name, recipients: [{address, bps}]}\` → 201 \`{split}\`; bps are integers summing to 10000, each address once. \`{action: "execute", splitId, amount, executionId?}\` pays \`amount\` (integer string, the token's smallest unit): each recipient floor(amount × bps / 10000), the remainder to the first recipient; answers ${execution}. 400 when the wallet lacks the token or the gas (nothing is sent); 502 with \`execution\` when a transfer fails (what was paid is recorded; re-running with the same executionId pays only what is missing); 409 when the executionId was used for another split or amount; 404 for a split or wallet that is not yours.`,
    auth: "user",
    rateLimit: "payments",
    body: z.discriminatedUnion("action", [defineSplitSchema, executeSplitSchema]),
    handler: async ({ auth, body }) => {
      if (body.action === "define") {
        return json(await defineSplit(auth.user.id, body), { status: 201 });
      }
      return executeSplit(auth.user.id, body);
    },
  }),
});
