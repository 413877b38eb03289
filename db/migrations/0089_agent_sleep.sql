-- Scale-to-zero (issue 26, decision 0164). An idle instance is put to sleep: its container is
-- stopped (memory back to the host) and the state `sleeping` is shown until a message wakes it.
alter table instances drop constraint instances_observed_state_check;
alter table instances add constraint instances_observed_state_check
  check (observed_state in ('new', 'provisioning', 'starting', 'running', 'stopped', 'crashed',
                            'oom_killed', 'missing', 'updating', 'error', 'unknown', 'sleeping'));

-- The last chat the platform relayed to the gateway (channel messages are in agent_messages).
alter table instances add column last_activity_at timestamptz;

-- One row per sleeping instance: what the agent page and the API answer while the gateway is
-- down (its last log lines), and what the channel watcher needs to tell a new message from one
-- the gateway already read (the highest Telegram update id pending when it went to sleep).
create table instance_sleep (
  instance_id text primary key references instances (id) on delete cascade,
  slept_at timestamptz not null default now(),
  log_lines jsonb not null default '[]',
  telegram_seen_update_id bigint,
  wake_reason text,
  wake_requested_at timestamptz
);
