-- The line of boots a user waits for (decision 0241): a lifecycle start, restart or repair, and a
-- provision's cold start. One row per instance whose boot waits for, or holds, one of its node's
-- boot slots; ordered by requested_at. Reconcile's restarts and pool fills on the node wait while
-- one of these (with a live job) still waits: a user is not kept behind a line of them.
create table instance_boots (
  instance_id text primary key references instances (id) on delete cascade,
  requested_at timestamptz not null default now(),
  node text not null,
  started_at timestamptz
);
create index instance_boots_line on instance_boots (node, requested_at) where started_at is null;
