-- Progress of every start-up, not only provisioning (issue 25, decision 0158): one row per run
-- (provision, start, restart, update, repair, wake) with how it went and how long it took. The
-- history of finished runs outlives its instance (no foreign key): it is what the estimate of
-- the next run's duration is made of, per action and path (a pooled gateway adopted or a cold boot).
create table instance_runs (
  id bigint generated always as identity primary key,
  instance_id text not null,
  action text not null check (action in ('provision', 'start', 'restart', 'update', 'repair', 'wake')),
  path text check (path in ('pool', 'cold')),
  started_at timestamptz not null default clock_timestamp(),
  finished_at timestamptz,
  outcome text check (outcome in ('ready', 'failed')),
  check ((finished_at is null) = (outcome is null))
);
create index instance_runs_instance on instance_runs (instance_id, id desc);
create index instance_runs_estimate on instance_runs (action, path, finished_at desc)
  where outcome = 'ready';

alter table instance_progress
  add column run_id bigint references instance_runs (id) on delete cascade;

-- Pushed progress: every change a watcher of the instance cares about (a step, a run begun or
-- ended, the observed state, an error) NOTIFYs `instance_progress` with the instance id, so each
-- web replica's event streams hear it whichever process wrote it (docs/decisions/0158-...).
create function notify_instance_progress() returns trigger language plpgsql as $$
begin
  perform pg_notify('instance_progress',
    case when tg_op = 'DELETE' then old.instance_id else new.instance_id end);
  return null;
end $$;

create function notify_instance_state() returns trigger language plpgsql as $$
begin
  perform pg_notify('instance_progress', new.id);
  return null;
end $$;

create trigger instance_progress_notify after insert or update or delete on instance_progress
  for each row execute function notify_instance_progress();
create trigger instance_runs_notify after insert or update on instance_runs
  for each row execute function notify_instance_progress();
create trigger instances_state_notify after update on instances
  for each row
  when (old.observed_state is distinct from new.observed_state
     or old.desired_state is distinct from new.desired_state
     or old.last_error is distinct from new.last_error)
  execute function notify_instance_state();
