-- Pending WebAuthn registrations: the challenge given to the browser, single use, short-lived.
create table webauthn_registration_challenges (
  challenge text primary key,                -- base64url, as sent in the options
  user_id text not null references users (id) on delete cascade,
  expires_at timestamptz not null,
  created_at timestamptz not null default now()
);
create index webauthn_registration_challenges_user_idx on webauthn_registration_challenges (user_id);

-- A name the user gives an authenticator, to tell several apart.
alter table webauthn_credentials add column name text not null default 'Security key'
  check (char_length(name) between 1 and 64);
