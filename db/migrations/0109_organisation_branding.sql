-- White-label branding of an organisation (issue 48, docs/decisions/0207): the display name and
-- logo its members' emails show, and the sender name of their From header (the address stays
-- the platform's MAIL_FROM). One row per organisation; a null column is "not set". Kept when
-- the plan drops below label: it applies again on an upgrade.
create table organisation_branding (
  organisation_id text primary key references users (id) on delete cascade,
  display_name text check (char_length(display_name) between 1 and 80),
  logo_url text check (logo_url like 'https://%' and char_length(logo_url) <= 500),
  sender_name text check (char_length(sender_name) between 1 and 60),
  updated_by text references users (id) on delete set null,
  updated_at timestamptz not null default now()
);
