-- instances.user_id references users (it waited for the accounts tables; decision 0039).
-- Deleting an account deletes its instance row in the same transaction (cascade), but the
-- teardown-instance job enqueued with it still needs the row's instance id (its model-endpoint
-- tokens), container and volume names (an adopted pooled gateway's container carries no user
-- label). A trigger keeps those in instance_teardowns until the job has removed everything.
create table instance_teardowns (
  instance_id text primary key,
  user_id text not null,
  container_name text not null,
  volume_name text not null,
  deleted_at timestamptz not null default now()
);
create index instance_teardowns_user_idx on instance_teardowns (user_id);

create function instances_keep_for_teardown() returns trigger language plpgsql as $$
begin
  -- Only when the owner is gone (the cascade from users): teardown deleting the row after it
  -- removed the container and volume needs no trace.
  if not exists (select 1 from users where id = old.user_id) then
    insert into instance_teardowns (instance_id, user_id, container_name, volume_name)
    values (old.id, old.user_id, old.container_name, old.volume_name)
    on conflict (instance_id) do nothing;
  end if;
  return old;
end $$;
create trigger instances_keep_for_teardown after delete on instances
  for each row execute function instances_keep_for_teardown();

-- Rows whose owner no longer exists (a teardown that never ran) move to instance_teardowns
-- through the trigger, so the foreign key can be added.
delete from instances i where not exists (select 1 from users u where u.id = i.user_id);

alter table instances add constraint instances_user_id_fkey
  foreign key (user_id) references users (id) on delete cascade;
