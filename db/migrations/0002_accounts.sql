-- Accounts: users, sessions, API keys, OAuth links, password resets, the credits ledger and
-- outgoing events (docs/decisions/0010–0019).

create table users (
  id text primary key,                       -- usr_…
  email text not null,                       -- as entered; compared case-insensitively
  email_verified boolean not null default false,
  name text not null,
  avatar_url text,
  password_hash text,                        -- argon2id PHC string; null for OAuth-only accounts
  plan text not null default 'free',
  referral_code text not null unique,        -- upper-case alphanumeric
  referred_by text references users (id) on delete set null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create unique index users_email_lower_idx on users (lower(email));

-- Server-side sessions: the cookie carries a random token, the table its SHA-256.
create table sessions (
  id text primary key,                       -- ses_…
  user_id text not null references users (id) on delete cascade,
  token_hash bytea not null unique,
  created_at timestamptz not null default now(),
  last_seen_at timestamptz not null default now(),
  expires_at timestamptz not null,
  revoked_at timestamptz,
  user_agent text,
  ip text
);
create index sessions_user_idx on sessions (user_id) where revoked_at is null;

create table api_keys (
  id text primary key,                       -- key_…
  user_id text not null references users (id) on delete cascade,
  name text not null check (char_length(name) between 1 and 64),
  key_hash bytea not null unique,            -- SHA-256 of the full key
  key_preview text not null,
  created_at timestamptz not null default now(),
  last_used_at timestamptz
);
create index api_keys_user_idx on api_keys (user_id, created_at);

create table oauth_accounts (
  provider text not null,                    -- oauth1 | oauth2
  provider_account_id text not null,
  user_id text not null references users (id) on delete cascade,
  email text not null,
  created_at timestamptz not null default now(),
  primary key (provider, provider_account_id),
  unique (user_id, provider)
);

-- A deleted user leaves the token behind with user_id null, so its use answers 404.
create table password_reset_tokens (
  token_hash bytea primary key,
  user_id text references users (id) on delete set null,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  used_at timestamptz
);
create index password_reset_tokens_user_idx on password_reset_tokens (user_id);

-- Platform credits (integer credits, the unit of the contract's credit packs). The balance is
-- the sum; a (user, reason, reference) triple is credited at most once.
-- The one credit ledger (docs/decisions/0013): money in integer micro-USD, one platform credit
-- being one USD (the contract's packs: 5 credits for 5 USD). The AI layer debits it (0003), the
-- referral program and credit packs credit it. "Once" is the unique (user, reason, reference).
create table credit_ledger (
  id text primary key,
  user_id text not null references users (id) on delete cascade,
  amount_micro_usd bigint not null check (amount_micro_usd <> 0),
  reason text not null,                      -- 'referral', 'purchase', 'usage', …
  reference text,                            -- what it is for (the other user, an order id, …)
  created_at timestamptz not null default now(),
  unique (user_id, reason, reference)
);

-- Outgoing events and every delivery attempt to an operator's webhook endpoint.
create table events (
  id text primary key,                       -- msg_… (the Standard Webhooks webhook-id)
  type text not null,
  data jsonb not null,
  created_at timestamptz not null default now()
);

create table webhook_deliveries (
  id bigint generated always as identity primary key,
  event_id text not null references events (id) on delete cascade,
  url text not null,
  attempt integer not null,
  status integer,                            -- HTTP status, null when no response
  error text,
  duration_ms integer not null,
  created_at timestamptz not null default now()
);
create index webhook_deliveries_event_idx on webhook_deliveries (event_id, url);
