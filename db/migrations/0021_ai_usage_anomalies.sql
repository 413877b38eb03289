-- Decision 0096: a provider that reports more usage than the bound a call was held for (prompt
-- tokens over the request's byte bound, completion tokens over max_tokens) is charged no more
-- than the hold; what it reported is kept here for operators (and logged at error level).
create table ai_usage_anomalies (
  usage_id text primary key references ai_usage (id) on delete cascade,
  user_id text,
  provider text,
  model text not null,
  prompt_tokens integer not null,
  prompt_bound integer not null,
  completion_tokens integer not null,
  completion_bound integer not null,
  reported_cost_micro_usd bigint not null,
  charged_micro_usd bigint not null,
  created_at timestamptz not null default now()
);
create index ai_usage_anomalies_created_idx on ai_usage_anomalies (created_at);
