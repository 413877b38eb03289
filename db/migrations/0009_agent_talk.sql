-- Talking to agents (issue 9): the session a user's chat continues, channel credentials, the
-- send-message endpoint's records, and each user's live stream.

-- The gateway session (key) that chat continues when the client names none, per agent.
create table agent_active_sessions (
  agent_id text primary key references agents (id) on delete cascade,
  user_id text not null references users (id) on delete cascade,
  session_key text not null,
  updated_at timestamptz not null default now()
);

-- Messaging-channel credentials (bot tokens), sealed; applied to the gateway's channel config.
-- AI provider keys are not here: they are BYOK keys of the AI layer (ai_user_keys).
create table channel_credentials (
  user_id text not null references users (id) on delete cascade,
  channel text not null check (channel in ('chatapp1', 'chatapp2', 'chatapp3')),
  sealed text not null,
  details jsonb not null default '{}'::jsonb,              -- ids that are not secret (guild, phone)
  updated_at timestamptz not null default now(),
  primary key (user_id, channel)
);

-- POST /api/chat records (the contract's Chat message).
create table chat_messages (
  id text primary key,                                     -- chat_…
  user_id text not null references users (id) on delete cascade,
  topic text not null,
  message text not null,
  reply text not null,
  status text not null,
  session_key text not null,
  created_at timestamptz not null default now()
);
create index chat_messages_user_idx on chat_messages (user_id, created_at desc, id desc);

-- The agent's live stream at the streaming provider (one per user); the stream key is secret.
create table live_streams (
  user_id text primary key references users (id) on delete cascade,
  provider text not null,
  live_stream_id text not null,
  playback_id text not null,
  stream_key_sealed text not null,
  created_at timestamptz not null default now()
);
