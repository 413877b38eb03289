-- Verified domains, enforced single sign-on and SCIM 2.0 provisioning (issue 49,
-- docs/decisions/0212-verified-domains-and-enforced-sso.md, 0213-scim-provisioning.md).

-- A domain an organisation claims. It proves it by publishing `agent-platform-verification=<token>`
-- as a TXT record at `_agent-platform.<domain>`; many organisations may claim a domain, one only
-- holds it verified (the partial unique index). `require_sso`: people with an email at the domain
-- sign in through the organisation's single sign-on only (its owners keep a break-glass password).
create table organisation_domains (
  id text primary key,
  organisation_id text not null references users (id) on delete cascade,
  domain text not null check (domain = lower(domain)),
  token text not null,
  created_by text references users (id) on delete set null,
  created_at timestamptz not null default now(),
  verified_at timestamptz,
  require_sso boolean not null default false,
  check (verified_at is not null or not require_sso),
  unique (organisation_id, domain)
);
create unique index organisation_domains_verified on organisation_domains (domain)
  where verified_at is not null;

-- The organisation's SCIM bearer token: one at a time, its SHA-256 only (shown once, as API keys).
create table scim_tokens (
  organisation_id text primary key references users (id) on delete cascade,
  token_hash bytea not null unique,
  token_preview text not null,
  created_by text references users (id) on delete set null,
  created_at timestamptz not null default now(),
  last_used_at timestamptz
);

-- The people an organisation's identity provider provisioned: the SCIM User resource. `user_id`
-- is the platform account (made by SCIM, `created_account`, or an existing one linked by email).
create table scim_users (
  id uuid primary key default gen_random_uuid(),
  organisation_id text not null references users (id) on delete cascade,
  user_id text not null references users (id) on delete cascade,
  user_name text not null,
  external_id text,
  given_name text,
  family_name text,
  active boolean not null default true,
  created_account boolean not null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (organisation_id, user_id)
);
create unique index scim_users_user_name on scim_users (organisation_id, lower(user_name));

-- SCIM groups and their members; a group's display name maps to a role (scim_group_roles).
create table scim_groups (
  id uuid primary key default gen_random_uuid(),
  organisation_id text not null references users (id) on delete cascade,
  display_name text not null,
  external_id text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create unique index scim_groups_display_name on scim_groups (organisation_id, lower(display_name));

create table scim_group_members (
  group_id uuid not null references scim_groups (id) on delete cascade,
  scim_user_id uuid not null references scim_users (id) on delete cascade,
  primary key (group_id, scim_user_id)
);
create index scim_group_members_user on scim_group_members (scim_user_id);

-- Group display name → role, set by an admin in the settings. Owner is never given by a group.
create table scim_group_roles (
  organisation_id text not null references users (id) on delete cascade,
  group_name text not null,
  role text not null check (role in ('admin', 'member', 'viewer', 'billing')),
  primary key (organisation_id, group_name),
  check (group_name = lower(group_name))
);
