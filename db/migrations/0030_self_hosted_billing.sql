-- Self-hosted billing (issue 18): plans an operator assigns without a payment processor, who
-- granted credits, and add-ons that are service requests instead of purchases.
-- docs/decisions/0100-self-hosted-mode.md, docs/decisions/0101-add-ons-sell-only-what-exists.md

-- An operator's plan for one user. Without a row a user of a server without a payment processor
-- has DEFAULT_PLAN (computed when read, never written); `none` withholds it.
create table plan_assignments (
  user_id text primary key references users (id) on delete cascade,
  plan text not null check (plan in ('none', 'solo', 'collective', 'label', 'network')),
  assigned_by text not null,
  assigned_at timestamptz not null default now()
);

-- Who granted a credit_ledger row by hand and why (an operator's grant; null for the rest).
alter table credit_ledger add column granted_by text, add column note text;

-- An add-on with nothing automatic behind it (Slack, Salesforce, custom integration, account
-- manager, API access) is asked for, not bought: operators see the request and follow it up.
create table service_requests (
  id text primary key,                          -- srq_…
  user_id text not null references users (id) on delete cascade,
  addon text not null,
  note text,
  status text not null default 'open' check (status in ('open', 'in_progress', 'done', 'declined')),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
-- One open request per user and add-on: asking twice is the same request.
create unique index service_requests_open_idx on service_requests (user_id, addon)
  where status in ('open', 'in_progress');
create index service_requests_status_idx on service_requests (status, created_at);
