-- Agents (issue 5): each is one OpenClaw agent inside its user's instance. The platform's row is
-- the truth for name, model and configuration; the worker writes them into the gateway's
-- config (agents.entries.<gateway_agent_id>) and records which revision the gateway accepted.
create table agents (
  id text primary key,                                   -- agt_…
  user_id text not null references users (id) on delete cascade,
  name text not null check (char_length(name) between 1 and 100),
  -- Key in the gateway's agents.entries: "main" for the user's first agent (a warm-pool
  -- gateway already runs it), the platform id for the others.
  gateway_agent_id text not null,
  model text not null,
  tier text not null check (tier in ('starter', 'pro', 'enterprise')),
  config jsonb not null default '{}'::jsonb,
  config_revision integer not null default 1,
  applied_revision integer not null default 0,           -- last revision the gateway accepted
  applied_at timestamptz,
  apply_error text,                                      -- why the last apply failed, if it did
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (user_id, gateway_agent_id)
);
create index agents_user_idx on agents (user_id, created_at);

-- What an agent exchanged, on every surface, recorded by the platform as it happens (so the
-- record survives a reset of the container). dedupe_key is the gateway's identity of the
-- message (session key + its position or id): recording the same history twice adds nothing.
create table agent_messages (
  id text primary key,                                   -- msg_…
  agent_id text not null references agents (id) on delete cascade,
  user_id text not null references users (id) on delete cascade,
  sender text not null check (sender in ('user', 'agent')),
  content text not null,
  platform text not null check (platform in ('web', 'chatapp1', 'chatapp2', 'chatapp3')),
  session_key text not null,
  dedupe_key text not null,
  created_at timestamptz not null,
  recorded_at timestamptz not null default now(),
  unique (agent_id, dedupe_key)
);
create index agent_messages_agent_idx on agent_messages (agent_id, created_at desc, id desc);

