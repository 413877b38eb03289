-- Invitations and seats (issue 48, docs/decisions/0204-invitations-and-seats.md).
--
-- An invitation asks an email address into an organisation with a role. Only the SHA-256 of its
-- random token is kept (the token travels in the mail alone); it is used once (accepted_at),
-- may be revoked (revoked_at) and expires (expires_at). One open invitation per organisation
-- and address: inviting the address again revokes the earlier one first.
create table organisation_invitations (
  id text primary key,
  organisation_id text not null references users (id) on delete cascade,
  email text not null,
  role text not null check (role in ('owner', 'admin', 'member', 'viewer', 'billing')),
  token_hash bytea not null unique,
  invited_by text references users (id) on delete set null,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  accepted_at timestamptz,
  accepted_by text references users (id) on delete set null,
  revoked_at timestamptz,
  check (accepted_at is null or revoked_at is null)
);
create unique index organisation_invitations_open
  on organisation_invitations (organisation_id, lower(email))
  where accepted_at is null and revoked_at is null;
create index organisation_invitations_by_organisation
  on organisation_invitations (organisation_id, created_at);

-- Seats an operator gives an organisation on top of its plan's (self-hosted mode, /ops).
create table organisation_seat_grants (
  organisation_id text primary key references users (id) on delete cascade,
  extra_seats integer not null check (extra_seats between 0 and 100000),
  set_by text not null,
  set_at timestamptz not null default now()
);
