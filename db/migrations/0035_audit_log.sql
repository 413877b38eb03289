-- The audit log (issue 18): an append-only record of security- and money-relevant actions.
-- Rows are only inserted. UPDATE is always refused; DELETE only by the retention purge
-- (app/server/platform/audit.server.ts), which sets audit.purge for its own transaction, and
-- even then only for rows older than the shortest retention (90 days). decision 0102.
create table audit_log (
  id bigint generated always as identity primary key,
  at timestamptz not null default now(),
  -- The account the entry concerns (whose log shows it). No foreign key: entries outlive a
  -- deleted account until their retention ends, and a cascade would be a DELETE.
  user_id text,
  actor_type text not null check (actor_type in ('user', 'api_key', 'operator', 'system')),
  actor_id text,                              -- usr_… / key_… ; null for the system
  ip text,
  action text not null,
  target text,
  outcome text not null check (outcome in ('success', 'failure')),
  details jsonb not null default '{}'::jsonb
);
create index audit_log_user_idx on audit_log (user_id, at desc, id desc);
create index audit_log_at_idx on audit_log (at, id);

create function audit_log_append_only() returns trigger language plpgsql as $$
begin
  if tg_op = 'DELETE'
     and coalesce(current_setting('audit.purge', true), '') = 'on'
     and old.at < now() - interval '90 days' then
    return old;
  end if;
  raise exception 'audit_log is append-only (% refused)', tg_op using errcode = '42501';
end $$;
create trigger audit_log_append_only before update or delete on audit_log
  for each row execute function audit_log_append_only();

create function audit_log_no_truncate() returns trigger language plpgsql as $$
begin
  raise exception 'audit_log is append-only (TRUNCATE refused)' using errcode = '42501';
end $$;
create trigger audit_log_no_truncate before truncate on audit_log
  for each statement execute function audit_log_no_truncate();
