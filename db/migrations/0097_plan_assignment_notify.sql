-- A user's plan assignment travels with their cached credential (decision 0120), so that a
-- read of the user's plan needs no query: an operator's assignment, change or removal tells
-- every replica to drop the user's credentials, as a change of the user row does.
create function notify_plan_assignment() returns trigger language plpgsql as $$
begin
  perform pg_notify('credentials', 'u:' || coalesce(new.user_id, old.user_id));
  return null;
end
$$;

create trigger plan_assignments_notify_credentials after insert or update or delete
  on plan_assignments for each row execute function notify_plan_assignment();
