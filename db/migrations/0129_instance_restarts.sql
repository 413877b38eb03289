-- Reconcile's restarts of gateways that went down (the engine's restart, a crash) wait their
-- turn for the same per-node slots as wakes (decision 0240): one row per instance whose restart
-- is queued. The line is the order of requested_at (kept across the job's retries and reconcile
-- queueing it again); node is the node whose slots it takes (null until its worker says);
-- started_at is when it took a slot (it has left the line). The row goes when the restart ends.
create table instance_restarts (
  instance_id text primary key references instances (id) on delete cascade,
  requested_at timestamptz not null default now(),
  node text,
  started_at timestamptz
);
create index instance_restarts_line on instance_restarts (requested_at, instance_id)
  where started_at is null;
