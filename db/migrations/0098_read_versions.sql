-- Versions of what an owner's repeated reads show (decision 0176): an agents list, an agent's
-- detail, a credit balance. Every change to the rows behind those views adds a row for the owner
-- in the same transaction; the owner's version is the sum of their rows' weights, which every
-- commit raises whatever order transactions commit in (a sequence's max would not: an earlier
-- number can commit later). A kept answer whose version is still the owner's is the one the data
-- gives. A TRUNCATE adds a row for '*', which every check reads too. Insert-only, so no two
-- writers wait for each other here (an upserted counter row would be locked to commit and could
-- deadlock them); now and then a writer folds its owner's older rows into one of the same total
-- weight, skipping any row another one holds.
create sequence read_version_seq;

create table read_versions (
  owner_id text not null,
  id bigint not null default nextval('read_version_seq'),
  weight bigint not null default 1,
  primary key (owner_id, id)
);

create function bump_read_version(owner text) returns void language plpgsql as $$
declare v bigint := nextval('read_version_seq');
begin
  insert into read_versions (owner_id, id) values (owner, v);
  if v % 16 = 0 then
    with folded as (
      delete from read_versions where ctid in (
        select ctid from read_versions where owner_id = owner and id < v
        for update skip locked)
      returning weight)
    insert into read_versions (owner_id, weight)
      select owner, sum(weight) from folded having count(*) > 0;
  end if;
end
$$;

-- Rows that carry their owner.
create function read_version_by_user() returns trigger language plpgsql as $$
begin
  perform bump_read_version(coalesce(new.user_id, old.user_id));
  return null;
end
$$;

-- Rows of an instance: its owner.
create function read_version_by_instance() returns trigger language plpgsql as $$
declare owner text;
begin
  select user_id into owner from instances where id = coalesce(new.instance_id, old.instance_id);
  if owner is not null then perform bump_read_version(owner); end if;
  return null;
end
$$;

-- Rows of an agent: its owner.
create function read_version_by_agent() returns trigger language plpgsql as $$
declare owner text;
begin
  select user_id into owner from agents where id = coalesce(new.agent_id, old.agent_id);
  if owner is not null then perform bump_read_version(owner); end if;
  return null;
end
$$;

-- An instance's live samples and activity stamps change every few seconds and no kept view
-- shows them: an update of only those keeps the version.
create function read_version_by_instance_row() returns trigger language plpgsql as $$
declare
  volatile_columns text[] := array['cpu_percent', 'memory_bytes', 'memory_limit_bytes', 'pids',
    'sampled_at', 'observed_at', 'updated_at', 'network_rx_bytes', 'network_tx_bytes',
    'storage_bytes', 'storage_measured_at', 'last_activity_at'];
begin
  if tg_op = 'UPDATE' and (to_jsonb(old) - volatile_columns) = (to_jsonb(new) - volatile_columns)
  then
    return null;
  end if;
  perform bump_read_version(coalesce(new.user_id, old.user_id));
  return null;
end
$$;

create function read_version_everyone() returns trigger language plpgsql as $$
begin
  perform bump_read_version('*');
  return null;
end
$$;

create trigger agents_read_version after insert or update or delete on agents
  for each row execute function read_version_by_user();
create trigger instances_read_version after insert or update or delete on instances
  for each row execute function read_version_by_instance_row();
create trigger credit_ledger_read_version after insert or update or delete on credit_ledger
  for each row execute function read_version_by_user();
create trigger agent_verifications_read_version after insert or update or delete
  on agent_verifications for each row execute function read_version_by_agent();
create trigger instance_runs_read_version after insert or update or delete on instance_runs
  for each row execute function read_version_by_instance();
create trigger instance_progress_read_version after insert or update or delete
  on instance_progress for each row execute function read_version_by_instance();

create trigger agents_read_version_truncate after truncate on agents
  for each statement execute function read_version_everyone();
create trigger instances_read_version_truncate after truncate on instances
  for each statement execute function read_version_everyone();
create trigger credit_ledger_read_version_truncate after truncate on credit_ledger
  for each statement execute function read_version_everyone();
create trigger agent_verifications_read_version_truncate after truncate on agent_verifications
  for each statement execute function read_version_everyone();
create trigger instance_runs_read_version_truncate after truncate on instance_runs
  for each statement execute function read_version_everyone();
create trigger instance_progress_read_version_truncate after truncate on instance_progress
  for each statement execute function read_version_everyone();
