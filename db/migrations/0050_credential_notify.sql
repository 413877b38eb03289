-- Web replicas cache who a credential belongs to (decision 0120). Any change to a user, an API
-- key or a session, whoever makes it (a service, an operator's console, a hand-written query),
-- tells every replica at commit on the `credentials` channel, so a deleted key, a revoked
-- session or a changed (suspended) user stops working at once. Inserts need no message: a
-- replica caches only credentials it has found.
create function notify_credentials() returns trigger language plpgsql as $$
begin
  perform pg_notify('credentials', case tg_table_name
    when 'users' then 'u:'
    when 'api_keys' then 'k:'
    else 's:'
  end || old.id);
  return null;
end
$$;

create trigger users_notify_credentials after update or delete on users
  for each row execute function notify_credentials();
create trigger api_keys_notify_credentials after update or delete on api_keys
  for each row execute function notify_credentials();
create trigger sessions_notify_credentials after update or delete on sessions
  for each row execute function notify_credentials();
