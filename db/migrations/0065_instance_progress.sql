-- What the worker is at while it provisions an instance (issue 25, decision 0137): one row per
-- step of the current run, with its time. A step that is not later than the last recorded one
-- starts a new run (the service clears the old steps), so the table holds one run per instance.
create table instance_progress (
  instance_id text not null references instances (id) on delete cascade,
  step text not null check (step in
    ('container-created', 'gateway-healthy', 'paired', 'warmed-up', 'ready')),
  at timestamptz not null default clock_timestamp(),
  primary key (instance_id, step)
);
