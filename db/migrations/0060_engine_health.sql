-- The container engine's health as the workers see it (issue 24): while it does not answer,
-- instances report `unknown` and lifecycle calls that need it answer 502. One row per
-- deployment (RUNTIME_DEPLOYMENT), written by every worker's engine check.
create table runtime_engines (
  deployment text primary key,
  reachable boolean not null,
  checked_at timestamptz not null,
  changed_at timestamptz not null,
  last_error text
);

alter table instances drop constraint instances_observed_state_check;
alter table instances add constraint instances_observed_state_check
  check (observed_state in ('new', 'provisioning', 'starting', 'running', 'stopped', 'crashed',
                            'oom_killed', 'missing', 'updating', 'error', 'unknown'));
