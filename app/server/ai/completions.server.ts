import { setTimeout as delay } from "node:timers/promises";
import { env } from "../platform/env.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { errorResponse, OVERHEAD_HEADER, overheadMs } from "../platform/http.server.ts";
import { logger } from "../platform/logger.server.ts";
import {
  recordAiOverhead,
  recordFirstToken,
  recordHeld,
  recordOverBound,
  recordProviderError,
} from "./ai-metrics.server.ts";
import { type BillingMode, type Reservation, reserve } from "./budgets.server.ts";
import { userKeys } from "./byok.server.ts";
import {
  affordableTokens,
  choicesOf,
  holdFor,
  promptTokenBound,
  requestedMaxTokens,
  withCompletionLimit,
} from "./call-bounds.server.ts";
import { type CatalogModel, loadCatalog, resolveModel } from "./catalog.server.ts";
import { isCoolingDown, recordFailure, recordSuccess } from "./cooldown.server.ts";
import { giveBack } from "./credit-leases.server.ts";
import { countTokens, meter } from "./metering.server.ts";
import { costMicroUsd } from "./money.server.ts";
import {
  type ChatBody,
  type Completion,
  contentText,
  type ProviderConfig,
  ProviderError,
  type ProviderName,
  type Usage,
} from "./providers/shared.server.ts";
import { clients, providerSettings } from "./providers.server.ts";
import { checkParams } from "./request-params.server.ts";
import { selectModel, type TaskType } from "./selection.server.ts";

// One completion through the layer: resolve the model (or pick one for the task), choose the
// billing mode (the user's own key, platform credits, or anonymous), reserve the most the call
// can cost, call the providers that serve the model — retrying transient errors on the same
// provider, falling back to the next, skipping cooled-down ones — and meter the outcome.

export interface CompleteOptions {
  endpoint: "chat" | "agents";
  userId: string | null;
  instanceId: string | null;
  /** The agent a gateway's call names (agent-hint.server.ts); checked when metered. */
  agentHint?: string | null;
  /** OpenAI-shaped body; `model` may be empty when `taskType` picks it. */
  body: ChatBody;
  taskType?: TaskType;
  /** The user's BYOK keys when the caller already has them (else they are read). */
  userKeys?: Map<ProviderName, string>;
  stream: boolean;
  signal?: AbortSignal;
  /** performance.now() when the request arrived, for the overhead figure. */
  startedAt: number;
  /** Where the time spent waiting on providers adds up (also when the call fails). */
  upstream?: Upstream;
}

/** Milliseconds spent waiting on providers during one call. */
export interface Upstream {
  ms: number;
}

interface Served {
  model: CatalogModel;
  mode: BillingMode | "none";
  /** Platform time: everything but waiting for providers, in ms. */
  overheadMs: number;
}

export type CompleteResult =
  | (Served & { kind: "json"; completion: Completion })
  | (Served & { kind: "stream"; stream: ReadableStream<Uint8Array> });

/** The bounds a call is held for: prompt tokens and completion tokens (all choices). */
export interface CallBounds {
  promptTokens: number;
  completionTokens: number;
  /** The completion limit the layer set (the caller set none), sent to the provider. */
  limit?: number;
}

/** The largest context window among the candidates; 0 when one of them is unknown. */
const contextOf = (candidates: CatalogModel[]) =>
  candidates.some((c) => !(c.contextLength > 0))
    ? 0
    : Math.max(...candidates.map((c) => c.contextLength));

/** The bounds of a call whose caller set max_tokens, and the hold that pays for them. */
export function boundsFor(candidates: CatalogModel[], body: ChatBody, maxTokens: number) {
  const promptTokens = promptTokenBound(body, contextOf(candidates));
  const completionTokens = maxTokens * choicesOf(body);
  const hold = holdFor(
    candidates.map((c) => c.prices),
    promptTokens,
    completionTokens,
  );
  return { promptTokens, completionTokens, hold };
}

/**
 * Holds what the call can cost at most (call-bounds.server.ts). A caller's max_tokens is held as
 * asked (402 when the balance cannot pay it); without one the layer holds the prompt and as many
 * completion tokens as the balance pays, up to AI_RESERVE_OUTPUT_TOKENS, and sends that limit.
 */
async function holdCall(
  userId: string,
  mode: BillingMode,
  candidates: CatalogModel[],
  body: ChatBody,
  signal: AbortSignal | undefined,
): Promise<{ reservation: Reservation; bounds: CallBounds }> {
  const asked = requestedMaxTokens(body);
  if (asked !== undefined) {
    const { promptTokens, completionTokens, hold } = boundsFor(candidates, body, asked);
    const reservation = await reserve(userId, hold, mode, { signal });
    return { reservation, bounds: { promptTokens, completionTokens } };
  }
  const prices = candidates.map((c) => c.prices);
  const promptTokens = promptTokenBound(body, contextOf(candidates));
  const choices = choicesOf(body);
  const cap = env().AI_RESERVE_OUTPUT_TOKENS;
  const reservation = await reserve(
    userId,
    {
      min: holdFor(prices, promptTokens, choices),
      max: holdFor(prices, promptTokens, cap * choices),
    },
    mode,
    { signal },
  );
  const limit = Math.max(
    1,
    Math.floor(
      affordableTokens(prices, promptTokens, reservation.amountMicroUsd, cap * choices) / choices,
    ),
  );
  // The draw is sized down to the limit's exact cost (what rounding to whole tokens left over).
  const exact = holdFor(prices, promptTokens, limit * choices);
  if (exact < reservation.amountMicroUsd) {
    giveBack(reservation.lease, reservation.amountMicroUsd - exact);
    reservation.amountMicroUsd = exact;
  }
  return {
    reservation,
    bounds: { promptTokens, completionTokens: limit * choices, limit },
  };
}

function usageOrCount(body: ChatBody, usage: Usage | null, text: string) {
  if (usage) return { ...usage, estimated: false };
  const prompt = body.messages.map((m) => contentText(m.content)).join("\n");
  return {
    promptTokens: countTokens(prompt),
    completionTokens: countTokens(text),
    estimated: true,
  };
}

/** The models a call may be served by, in the order they are tried (the first is the choice). */
export async function candidatesFor(
  options: Pick<CompleteOptions, "body" | "taskType">,
): Promise<CatalogModel[]> {
  const catalog = await loadCatalog();
  if (catalog.models.length === 0) throw new DomainError(404, "No models available");
  const requested = options.body.model?.trim();
  if (requested) {
    const found = resolveModel(catalog, requested);
    if (found.length === 0) throw new DomainError(404, `Model ${requested} not found`);
    return found;
  }
  const picked = selectModel(catalog.models, options.taskType ?? "general");
  if (!picked) throw new DomainError(404, `No model available for taskType ${options.taskType}`);
  const same = resolveModel(catalog, picked.id).filter((m) => m.provider !== picked.provider);
  return [picked, ...same];
}

/** A call's signal: the client's, plus the provider timeout until `clear`. */
function withTimeout(signal: AbortSignal | undefined) {
  const controller = new AbortController();
  const timer = setTimeout(
    () => controller.abort(new DOMException("The provider timed out", "TimeoutError")),
    env().AI_TIMEOUT_MS,
  );
  // A listener rather than AbortSignal.any (cheaper per call; same effect). It stays for the
  // life of a stream, so a client that goes away still cancels the provider call.
  if (signal?.aborted) controller.abort(signal.reason);
  else signal?.addEventListener("abort", () => controller.abort(signal.reason), { once: true });
  return { signal: controller.signal, clear: () => clearTimeout(timer) };
}

/**
 * Answers `fn`'s domain errors (401, 402, 404, 502…) as the one error shape carrying
 * `x-overhead-ms`: the time since `startedAt` less the time spent waiting on providers.
 */
export async function withOverhead(
  startedAt: number,
  fn: (upstream: Upstream) => Promise<Response>,
): Promise<Response> {
  const upstream: Upstream = { ms: 0 };
  try {
    return await fn(upstream);
  } catch (error) {
    if (!(error instanceof DomainError)) throw error;
    const response = errorResponse(error.status, error.message, error.extra);
    response.headers.set(OVERHEAD_HEADER, overheadMs(performance.now() - startedAt - upstream.ms));
    return response;
  }
}

export async function complete(options: CompleteOptions): Promise<CompleteResult> {
  const { userId, body } = options;
  let candidates = await candidatesFor(options);
  // Before anything is held or sent: a parameter the platform does not price is refused.
  checkParams(
    body,
    candidates.map((c) => c.provider),
  );

  // Billing mode: the user's own keys for the providers that serve the model, else credits.
  let mode: BillingMode | "none" = "none";
  const configs = new Map<string, ProviderConfig>();
  for (const c of candidates) configs.set(c.provider, providerSettings(c.provider));
  if (userId) {
    const keys = options.userKeys ?? (await userKeys(userId));
    const own = candidates.filter((c) => keys.has(c.provider));
    if (own.length > 0) {
      mode = "byok";
      candidates = own;
      for (const c of own) {
        configs.set(c.provider, { ...providerSettings(c.provider), apiKey: keys.get(c.provider) });
      }
    } else {
      mode = "credits";
    }
  }

  const available = candidates.filter((c) => !isCoolingDown(c.provider));
  if (available.length === 0) {
    throw new DomainError(
      502,
      `Every provider serving ${candidates[0]?.id} is cooling down after repeated failures`,
    );
  }

  let reservation: Reservation | undefined;
  let bounds: CallBounds | undefined;
  // A call that costs nothing wherever it goes (a local server's models) holds nothing: a hold
  // of 0 is refused like an empty balance, which answered 402 to users with no credits.
  const free = available.every((c) => c.prices.prompt === 0n && c.prices.completion === 0n);
  if (userId && mode !== "none" && !free) {
    ({ reservation, bounds } = await holdCall(userId, mode, available, body, options.signal));
    recordHeld(reservation.amountMicroUsd);
  }

  const { AI_RETRIES, AI_RETRY_DELAY_MS } = env();
  const upstream = options.upstream ?? { ms: 0 };
  let lastError: ProviderError | Error | undefined;
  const base = {
    userId,
    instanceId: options.instanceId,
    agentHint: options.agentHint ?? null,
    endpoint: options.endpoint,
    billingMode: mode,
    stream: options.stream,
  } as const;
  /**
   * Meters one answered call (a stream when it ends) at its exact cost and settles the hold. A
   * provider reporting more than the call's bounds is charged no more than the hold (what the
   * user was held for) and recorded as an anomaly for operators.
   */
  const meterAnswer = (
    model: CatalogModel,
    request: ChatBody,
    usage: Usage | null,
    text: string,
    error?: string,
  ) => {
    const counted = usageOrCount(request, usage, text);
    const cost = costMicroUsd(model.prices, counted.promptTokens, counted.completionTokens);
    const charged = reservation ? Math.min(cost, reservation.amountMicroUsd) : cost;
    const over =
      bounds !== undefined &&
      !counted.estimated &&
      (counted.promptTokens > bounds.promptTokens ||
        counted.completionTokens > bounds.completionTokens);
    if (over && bounds) {
      logger().error(
        {
          provider: model.provider,
          model: model.id,
          userId,
          promptTokens: counted.promptTokens,
          promptBound: bounds.promptTokens,
          completionTokens: counted.completionTokens,
          completionBound: bounds.completionTokens,
          reportedCostMicroUsd: cost,
          chargedMicroUsd: charged,
        },
        "AI provider reported usage over the call's bound",
      );
      recordOverBound(model.provider, model.id, cost - charged);
    }
    meter(
      {
        ...base,
        provider: model.provider,
        model: model.id,
        promptTokens: counted.promptTokens,
        completionTokens: counted.completionTokens,
        tokensEstimated: counted.estimated,
        costMicroUsd: charged,
        latencyMs: performance.now() - options.startedAt,
        status: error && error !== "client disconnected" ? "error" : "ok",
        httpStatus: 200,
        error: error ?? null,
        ...(over && bounds
          ? {
              anomaly: {
                promptBound: bounds.promptTokens,
                completionBound: bounds.completionTokens,
                reportedCostMicroUsd: cost,
              },
            }
          : {}),
      },
      reservation,
    );
  };

  for (const model of available) {
    const config = configs.get(model.provider)!;
    const request = withCompletionLimit(
      { ...body, model: model.modelId },
      model.provider,
      config.custom,
      bounds?.limit,
    );
    for (let attempt = 0; attempt <= AI_RETRIES; attempt++) {
      const timeout = withTimeout(options.signal);
      const t0 = performance.now();
      try {
        const client = clients[model.provider];
        if (options.stream) {
          const result = await client.chatStream(config, request, timeout.signal);
          timeout.clear();
          upstream.ms += performance.now() - t0;
          recordSuccess(model.provider);
          const overheadMs = performance.now() - options.startedAt - upstream.ms;
          recordAiOverhead(overheadMs);
          void result.done.then(({ usage, text, error, firstChunkAt }) => {
            meterAnswer(model, request, usage, text, error);
            if (firstChunkAt !== undefined) {
              recordFirstToken(model.provider, model.id, firstChunkAt - options.startedAt);
            }
          });
          return { kind: "stream", stream: result.stream, model, mode, overheadMs };
        }
        const completion = await client.chat(config, request, timeout.signal);
        timeout.clear();
        upstream.ms += performance.now() - t0;
        recordSuccess(model.provider);
        meterAnswer(model, request, completion.usage, completion.text);
        const overheadMs = performance.now() - options.startedAt - upstream.ms;
        recordAiOverhead(overheadMs);
        return { kind: "json", completion, model, mode, overheadMs };
      } catch (error) {
        timeout.clear();
        upstream.ms += performance.now() - t0;
        if (options.signal?.aborted) {
          lastError = new Error("client disconnected");
          break;
        }
        const providerError =
          error instanceof ProviderError
            ? error
            : new ProviderError(model.provider, 502, (error as Error).message);
        lastError = providerError;
        if (providerError.clientError) {
          meter(
            {
              ...base,
              provider: model.provider,
              model: model.id,
              promptTokens: 0,
              completionTokens: 0,
              tokensEstimated: false,
              costMicroUsd: 0,
              latencyMs: performance.now() - options.startedAt,
              status: "client_error",
              httpStatus: 400,
              error: providerError.message,
            },
            reservation,
          );
          throw new DomainError(400, providerError.message);
        }
        recordProviderError(model.provider, providerError.transient);
        logger().warn(
          { provider: model.provider, model: model.id, attempt, err: providerError.message },
          "AI provider call failed",
        );
        if (!providerError.transient || attempt === AI_RETRIES) {
          recordFailure(model.provider);
          break;
        }
        if (AI_RETRY_DELAY_MS > 0) await delay(AI_RETRY_DELAY_MS * 2 ** attempt);
      }
    }
    if (options.signal?.aborted) break;
  }

  const message = lastError?.message ?? "No provider answered";
  meter(
    {
      ...base,
      provider: available.at(-1)?.provider ?? null,
      model: available[0]?.id ?? body.model,
      promptTokens: 0,
      completionTokens: 0,
      tokensEstimated: false,
      costMicroUsd: 0,
      latencyMs: performance.now() - options.startedAt,
      status: "error",
      httpStatus: 502,
      error: message,
    },
    reservation,
  );
  throw new DomainError(502, `AI provider error: ${message}`);
}
