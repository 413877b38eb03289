-- Organisations (issue 48, docs/decisions/0203-organisations-are-owners.md): an organisation is
-- an owner like a person, so it is a row of `users` (kind 'organisation') and every table that
-- a person owns rows of (`user_id`) holds an organisation's rows the same way, with the same
-- foreign keys and cascades. An organisation has no email, password, referral code or session of
-- its own: a lookup by email or code can never find one, and nobody signs in as one. People act
-- in it as members, with a role.
alter table users add column kind text not null default 'person'
  check (kind in ('person', 'organisation'));
alter table users alter column email drop not null;
alter table users alter column referral_code drop not null;
alter table users add constraint users_person_has_email
  check ((kind = 'person') = (email is not null and referral_code is not null));
alter table users add constraint users_organisation_signs_in_never
  check (kind = 'person' or (password_hash is null and not is_operator));

create table organisation_members (
  organisation_id text not null references users (id) on delete cascade,
  user_id text not null references users (id) on delete cascade,
  role text not null check (role in ('owner', 'admin', 'member', 'viewer', 'billing')),
  added_by text references users (id) on delete set null,
  created_at timestamptz not null default now(),
  primary key (organisation_id, user_id)
);
create index organisation_members_user on organisation_members (user_id);

-- Only people are members, only organisations have them (a trigger: a check cannot see rows).
create function organisation_members_kinds() returns trigger language plpgsql as $$
begin
  if (select kind from users where id = new.organisation_id) is distinct from 'organisation' then
    raise exception 'organisation_members.organisation_id % is not an organisation', new.organisation_id;
  end if;
  if (select kind from users where id = new.user_id) is distinct from 'person' then
    raise exception 'organisation_members.user_id % is not a person', new.user_id;
  end if;
  return new;
end $$;
create trigger organisation_members_kinds before insert or update on organisation_members
  for each row execute function organisation_members_kinds();

-- A membership's change reaches every replica's credential cache and open socket at once, as a
-- session's does (migration 0050's channel): the member's cached access goes.
create function notify_membership() returns trigger language plpgsql as $$
begin
  perform pg_notify('credentials', 'm:' || old.organisation_id || ':' || old.user_id);
  return null;
end $$;
create trigger organisation_members_notify after update or delete on organisation_members
  for each row execute function notify_membership();
