-- Per-agent backups (issue 26, docs/decisions/0140-backups.md): the gateway's state volume and
-- the platform's records of the agent, encrypted, in the backup store (local folder or S3).
-- The row is the index; the object holds the data. A restore's outcome is kept on the backup.
create table agent_backups (
  id text primary key,                                   -- bkp_…
  user_id text not null references users (id) on delete cascade,
  -- No foreign key: a backup taken before an agent's deletion outlives it (decision 0140).
  agent_id text not null,
  reason text not null check (reason in ('manual', 'scheduled', 'pre-update', 'pre-restore', 'pre-delete', 'imported')),
  status text not null default 'pending' check (status in ('pending', 'ready', 'failed')),
  store text not null check (store in ('local', 's3')),
  object_key text not null unique,
  size_bytes bigint,                                     -- encrypted bytes in the store
  sha256 text,                                           -- of the encrypted bytes
  error text,                                            -- why it failed, when it did
  -- The records as the agent's deletion captured them, until the worker packs them.
  records jsonb,
  restore_status text check (restore_status in ('running', 'restored', 'failed')),
  restore_error text,
  restored_at timestamptz,
  created_at timestamptz not null default now(),
  completed_at timestamptz
);
create index agent_backups_agent_idx on agent_backups (agent_id, created_at desc);
create index agent_backups_due_idx on agent_backups (user_id, reason, created_at desc);
