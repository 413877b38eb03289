-- The paid plugin gateway (issue 22, POST /api/v1/gateway): what each plugin costs per call, and
-- every paid call. Prices are integer micro-USD; an x402 payment carries the same price in the
-- token's smallest unit. docs/decisions/0128-paid-plugin-gateway.md

create table gateway_plugin_prices (
  plugin text primary key,
  price_micro_usd bigint not null check (price_micro_usd > 0),
  enabled boolean not null default true,
  updated_by text,
  updated_at timestamptz not null default now()
);

insert into gateway_plugin_prices (plugin, price_micro_usd) values
  ('ai.completion', 10000),   -- 0.01 USD a call
  ('agent.chat', 20000);      -- 0.02 USD a turn

-- One row per call that was paid: by credits (a credit_ledger debit, reference = id) or by an
-- x402 authorisation (settled through the transfer ledger, purpose x402:<payer>:<nonce>).
create table gateway_calls (
  id text primary key,
  plugin text not null,
  payment text not null check (payment in ('credits', 'x402')),
  user_id text,                              -- the caller's account, when one was named
  payer text,                                -- x402: the paying address
  price_micro_usd bigint not null,
  amount numeric(78, 0),                     -- x402: token units settled
  transaction text,                          -- x402: the settlement's hash
  created_at timestamptz not null default now()
);
create index gateway_calls_user_idx on gateway_calls (user_id, created_at desc);
-- A settlement pays for one call only.
create unique index gateway_calls_transaction_once on gateway_calls (transaction)
  where transaction is not null;
