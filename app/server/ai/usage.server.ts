import { db } from "../platform/db.server.ts";

// What a user's AI usage looks like over the last days: tokens and cost per UTC day and model,
// for the usage page (its chart) and billing's get-usage action.

export interface DailyUsage {
  day: string;
  model: string;
  calls: number;
  promptTokens: number;
  completionTokens: number;
  costMicroUsd: number;
}

export async function dailyUsage(userId: string, days = 30): Promise<DailyUsage[]> {
  const rows = await db()<
    {
      day: string;
      model: string;
      calls: number;
      prompt_tokens: number;
      completion_tokens: number;
      cost: number;
    }[]
  >`select to_char((created_at at time zone 'utc')::date, 'YYYY-MM-DD') as day, model,
      count(*)::int as calls,
      sum(prompt_tokens)::bigint as prompt_tokens,
      sum(completion_tokens)::bigint as completion_tokens,
      sum(cost_micro_usd)::bigint as cost
    from ai_usage
    where user_id = ${userId}
      and created_at >= (now() at time zone 'utc')::date - ${days - 1}::int
    group by 1, 2 order by 1, 2`;
  return rows.map((r) => ({
    day: r.day,
    model: r.model,
    calls: r.calls,
    promptTokens: r.prompt_tokens,
    completionTokens: r.completion_tokens,
    costMicroUsd: r.cost,
  }));
}
