-- Which OpenClaw build new instances and updates get, and which versions are refused
-- (issue 26, docs/decisions/0161-gateway-versions.md). One row; the environment's
-- AGENT_GATEWAY_IMAGE and GATEWAY_BLOCKED_VERSIONS apply where it says nothing.
create table gateway_version_policy (
  id boolean primary key default true check (id),
  pinned_image text,                                   -- null: AGENT_GATEWAY_IMAGE
  blocked_versions text[] not null default '{}',       -- added to GATEWAY_BLOCKED_VERSIONS
  updated_by text references users (id) on delete set null,
  updated_at timestamptz not null default now()
);
