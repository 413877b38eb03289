-- The nodes of a multi-node runtime as the workers last saw them (issue 19, decision 0167): the
-- operator console reads this table (the web never calls the engine). One row per node per
-- deployment, rewritten by the worker's node check and after a drain; a drain's outcome is kept.
create table runtime_nodes (
  deployment text not null,
  node_id text not null,
  hostname text not null,
  role text not null,
  state text not null,                -- ready, down, unknown, disconnected (the scheduler's)
  availability text not null,         -- active, pause, drain, or draining (closed by us)
  address text not null,
  memory_bytes bigint not null,
  nano_cpus bigint not null,
  reserved_memory_bytes bigint not null,
  reserved_nano_cpus bigint not null,
  instances jsonb not null default '[]',  -- [{id, instanceId, running}]
  checked_at timestamptz not null,
  drain_status text check (drain_status in ('requested', 'running', 'done', 'failed')),
  drain_error text,
  drain_changed_at timestamptz,
  primary key (deployment, node_id)
);
