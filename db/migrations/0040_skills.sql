-- The skills marketplace (issue 21): skills the platform ships, skills users publish, their
-- immutable versions and where they are installed. docs/decisions/0110-skills-api.md,
-- docs/decisions/0111-skills-catalog-and-publishing.md

create table skills (
  id text primary key,                          -- skl_…
  name text not null unique,                    -- the SKILL.md `name`; one namespace for all
  source text not null check (source in ('platform', 'user')),
  publisher_id text references users (id) on delete cascade, -- null: the platform
  visibility text not null check (visibility in ('public', 'private')),
  category text not null default 'general',
  created_at timestamptz not null default now(),
  check ((source = 'platform') = (publisher_id is null))
);

-- A published version never changes: a new version is a new row.
create table skill_versions (
  id text primary key,                          -- skv_…
  skill_id text not null references skills (id) on delete cascade,
  version text not null,                        -- MAJOR.MINOR.PATCH
  major int not null,
  minor int not null,
  patch int not null,
  description text not null,
  requirements jsonb not null,                  -- {bins, env, config, channels}
  skill_md text not null,
  archive bytea not null,                       -- normalised zip, SKILL.md at its root
  sha256 text not null,
  size_bytes int not null,
  file_count int not null,
  approved_at timestamptz,                      -- public versions: listed once approved
  approved_by text,
  unlisted_at timestamptz,                      -- the publisher withdrew it
  created_at timestamptz not null default now(),
  unique (skill_id, version)
);
create index skill_versions_skill_idx on skill_versions (skill_id, major desc, minor desc, patch desc);

create table skill_installs (
  agent_id text not null references agents (id) on delete cascade,
  skill_id text not null references skills (id) on delete cascade,
  version_id text not null references skill_versions (id),
  user_id text not null references users (id) on delete cascade,
  enabled boolean not null default true,
  installed_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  primary key (agent_id, skill_id)
);
create index skill_installs_skill_idx on skill_installs (skill_id);
create index skill_installs_user_idx on skill_installs (user_id);
