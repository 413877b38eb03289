-- Hard storage limits per instance (issue 50, decisions 0216, 0217).

-- The limit the worker last applied to the instance's volume (null: none applied, e.g. a host
-- that cannot enforce one), and the highest warning level sent since usage was last below 80 %
-- (0, 80 or 95): a warning goes out once per crossing.
alter table instances
  add column storage_limit_bytes bigint check (storage_limit_bytes > 0),
  add column storage_warned_percent smallint not null default 0
    check (storage_warned_percent in (0, 80, 95)),
  -- A lower limit is owed (a subscription ended) while the data is above it: the higher one
  -- stays until then, and nothing is deleted (decision 0217).
  add column storage_grace_until timestamptz;

-- An operator's limit for one user (/ops), in place of the plan's and the upgrades'.
alter table users
  add column storage_limit_override_bytes bigint check (storage_limit_override_bytes > 0);

-- Whether the worker of a deployment can enforce storage limits, and why not (logged at start
-- and shown in /ops: never silent).
create table runtime_storage (
  deployment text primary key,
  enforced boolean not null,
  detail text not null,
  checked_at timestamptz not null default now()
);
