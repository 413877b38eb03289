-- Billing with the payment processor (issue 7): Stripe customers, subscriptions as Stripe last
-- said they were, incoming events stored once by id, storage grants and an append-only ledger of
-- plan changes. Credits live in credit_ledger (0002). docs/decisions/0040-billing-with-stripe.md

-- One Stripe customer per user, reused by every checkout.
create table billing_customers (
  user_id text primary key references users (id) on delete cascade,
  stripe_customer_id text not null unique,
  created_at timestamptz not null default now()
);

-- Every Stripe subscription of a user (a plan, an add-on, the enterprise suite or a billing-API
-- plan), written only from what Stripe answers when re-read (never from a webhook payload).
create table subscriptions (
  id text primary key,                          -- Stripe subscription id (sub_…)
  user_id text not null references users (id) on delete cascade,
  stripe_customer_id text not null,
  kind text not null check (kind in ('plan', 'addon', 'suite', 'api')),
  item text not null,                           -- catalog id: solo, audit-logs, suite, pro, …
  price_id text not null,
  status text not null,                         -- Stripe's: active, trialing, past_due, canceled, …
  current_period_end timestamptz,
  cancel_at_period_end boolean not null default false,
  canceled_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index subscriptions_user_idx on subscriptions (user_id);

-- Incoming webhook events: the primary key makes a replay a no-op.
create table payment_events (
  id text primary key,                          -- Stripe event id (evt_…)
  type text not null,
  object_id text not null,                      -- the session, subscription or invoice id
  livemode boolean not null default false,
  received_at timestamptz not null default now(),
  processed_at timestamptz,
  attempts integer not null default 0,
  last_error text
);

-- Storage bought through the storage upgrade: one row per completed checkout session.
create table storage_grants (
  checkout_session_id text primary key,
  user_id text not null references users (id) on delete cascade,
  gigabytes integer not null check (gigabytes > 0),
  created_at timestamptz not null default now()
);
create index storage_grants_user_idx on storage_grants (user_id);

-- Append-only history of every change of a subscription's item or status (and so of the
-- user's plan). Rows are only inserted.
create table billing_ledger (
  id bigint generated always as identity primary key,
  user_id text not null references users (id) on delete cascade,
  subscription_id text,
  kind text not null,                           -- subscription | storage | payment_failed
  item text,
  from_status text,
  to_status text,
  detail text,
  reference text,                               -- what it came from (event, session, invoice id)
  created_at timestamptz not null default now()
);
create index billing_ledger_user_idx on billing_ledger (user_id, created_at);
-- At most one notice per failed invoice (the email is sent once).
create unique index billing_ledger_payment_failed_once on billing_ledger (reference)
  where kind = 'payment_failed';
