-- The unified AI layer (issue 6): model catalog cache, per-instance tokens of hosted gateways,
-- bring-your-own-key provider keys, usage metering, credit reservations and budgets.
-- Users are referenced by text id without a foreign key: `users` arrives with the accounts
-- migration (0002) in parallel (docs/decisions/0024-ai-metering-credits-budgets.md).

-- Catalog of the models each configured provider offers, as last listed (or taken from the
-- checked-in price table when the listing was unreachable). Prices in micro-USD per million
-- tokens, which is the same number as pico-USD per token: integers, no float drift.
create table ai_models (
  provider text not null,
  model_id text not null,                      -- the provider's own id (gpt-4o, claude-…, …)
  id text not null,                            -- <vendor>/<model>
  family text not null,                        -- <vendor>/<normalised model>: fallback key
  name text not null,
  description text not null default '',
  context_length integer not null default 0,
  prompt_price bigint not null,                -- micro-USD per 1M prompt tokens
  completion_price bigint not null,            -- micro-USD per 1M completion tokens
  capabilities text[] not null default '{}',
  featured boolean not null default false,
  source text not null check (source in ('listing', 'fallback')),
  refreshed_at timestamptz not null default now(),
  primary key (provider, model_id)
);
create index ai_models_family_idx on ai_models (family);

-- One row per provider: when its listing was last tried and last succeeded.
create table ai_catalog_refreshes (
  provider text primary key,
  attempted_at timestamptz not null,
  succeeded_at timestamptz,
  source text,
  model_count integer not null default 0,
  error text
);

-- Tokens that hosted gateways present to the agents' model endpoint. The runtime writes them
-- (issueInstanceToken); only the SHA-256 hash is stored.
create table ai_instance_tokens (
  token_hash text primary key,                 -- hex SHA-256 of the token
  user_id text not null,
  instance_id text not null,
  created_at timestamptz not null default now(),
  revoked_at timestamptz
);
create index ai_instance_tokens_instance_idx on ai_instance_tokens (instance_id);

-- A user's own provider keys (BYOK), sealed with AES-256-GCM (platform/crypto.server.ts).
create table ai_user_keys (
  user_id text not null,
  provider text not null check (provider in ('openai', 'anthropic', 'google', 'openrouter')),
  sealed_key text not null,
  key_preview text not null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  primary key (user_id, provider)
);

-- The credit ledger belongs to billing; created here only if billing has not created it yet.
create table if not exists credit_ledger (
  id text primary key,
  user_id text not null,
  amount_micro_usd bigint not null,
  reason text not null,
  created_at timestamptz not null default now()
);
create index if not exists credit_ledger_user_idx on credit_ledger (user_id);

-- The AI layer's running view of each user's money, so that a call checks and holds credit in
-- one single-row statement instead of summing the ledger: the balance mirrors
-- sum(credit_ledger.amount_micro_usd) through the trigger below (whoever writes the ledger),
-- `held` is what calls in flight have reserved, `spent_today` what the user spent on AI on
-- `spend_day` (UTC) — platform credits and BYOK alike — against the daily limit.
create table ai_accounts (
  user_id text primary key,
  balance_micro_usd bigint not null default 0,
  held_micro_usd bigint not null default 0 check (held_micro_usd >= 0),
  spend_day date not null default (now() at time zone 'utc')::date,
  spent_today_micro_usd bigint not null default 0,
  daily_limit_micro_usd bigint check (daily_limit_micro_usd >= 0),  -- null: AI_DAILY_LIMIT_USD
  updated_at timestamptz not null default now()
);

create function ai_accounts_follow_ledger() returns trigger language plpgsql as $$
begin
  if tg_op in ('UPDATE', 'DELETE') then
    update ai_accounts set balance_micro_usd = balance_micro_usd - old.amount_micro_usd,
      updated_at = now() where user_id = old.user_id;
  end if;
  if tg_op in ('INSERT', 'UPDATE') then
    insert into ai_accounts (user_id, balance_micro_usd) values (new.user_id, new.amount_micro_usd)
    on conflict (user_id) do update
      set balance_micro_usd = ai_accounts.balance_micro_usd + excluded.balance_micro_usd,
        updated_at = now();
  end if;
  return null;
end
$$;

create trigger credit_ledger_ai_accounts after insert or update or delete on credit_ledger
  for each row execute function ai_accounts_follow_ledger();

insert into ai_accounts (user_id, balance_micro_usd)
  select user_id, sum(amount_micro_usd) from credit_ledger group by user_id;

-- Money held for one call in flight: reserved before the provider is called, released when the
-- call is metered. Rows older than the reservation TTL are from a crashed process: the catalog
-- job sweeps them and releases what they held.
create table ai_reservations (
  id text primary key,
  user_id text not null,
  amount_micro_usd bigint not null check (amount_micro_usd >= 0),
  created_at timestamptz not null default now()
);
create index ai_reservations_created_idx on ai_reservations (created_at);

-- Every call through the layer, successful or not.
create table ai_usage (
  id text primary key,
  user_id text,                                -- null for anonymous /api/ai/chat (until auth)
  instance_id text,
  endpoint text not null check (endpoint in ('chat', 'agents')),
  provider text,
  model text not null,
  prompt_tokens integer not null default 0,
  completion_tokens integer not null default 0,
  tokens_estimated boolean not null default false,
  cost_micro_usd bigint not null default 0,
  uncollected_micro_usd bigint not null default 0,
  billing_mode text not null check (billing_mode in ('credits', 'byok', 'none')),
  stream boolean not null default false,
  latency_ms integer not null,
  status text not null check (status in ('ok', 'error', 'client_error')),
  http_status integer not null,
  error text,
  created_at timestamptz not null default now()
);
create index ai_usage_user_day_idx on ai_usage (user_id, created_at);
