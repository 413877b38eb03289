-- The agent ingress (docs/decisions/0115-agent-ingress.md): one-time hand-offs from the main
-- origin to an agent's host, and the per-host sessions they open. Both keep only SHA-256 hashes
-- of their tokens, and both die with the platform session they came from (sign-out everywhere
-- revokes it; deleting it cascades).
create table agent_ingress_handoffs (
  token_hash bytea primary key,
  session_id text not null references sessions (id) on delete cascade,
  target_id text not null,                 -- the agent (agt_…) or user (usr_…) id of the host
  next_path text not null,
  expires_at timestamptz not null,
  used_at timestamptz
);
create index agent_ingress_handoffs_expires_idx on agent_ingress_handoffs (expires_at);

create table agent_ingress_sessions (
  token_hash bytea primary key,
  session_id text not null references sessions (id) on delete cascade,
  target_id text not null,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null
);
create index agent_ingress_sessions_session_idx on agent_ingress_sessions (session_id);
