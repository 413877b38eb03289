-- One agent instance per user: a gateway container (OpenClaw) run by a runtime driver.
-- Desired state is what the user asked for; observed state is what the worker last saw
-- (Docker inspect + gateway health). Secrets are sealed (platform/crypto.server.ts).
-- user_id has no foreign key yet: the users table arrives with the accounts branch (0002);
-- the merge adds `references users (id) on delete cascade` (docs/decisions/0031).
create table instances (
  id text primary key,                                   -- ins_…
  user_id text not null unique,
  driver text not null default 'docker' check (driver in ('docker')),
  plan text not null default 'solo',
  container_id text,
  container_name text not null,
  volume_name text not null,
  desired_state text not null default 'running'
    check (desired_state in ('running', 'stopped')),
  observed_state text not null default 'new'
    check (observed_state in ('new', 'provisioning', 'starting', 'running', 'stopped',
                              'crashed', 'oom_killed', 'missing', 'updating', 'error')),
  health text not null default 'unknown' check (health in ('unknown', 'healthy', 'unhealthy')),
  image text,                                            -- tag the container runs
  image_id text,
  gateway_version text,                                  -- hello-ok server.version
  gateway_address text,                                  -- host:port the platform reaches
  gateway_token_sealed text not null,
  device_id text,                                        -- sha256 hex of the raw public key
  device_private_key_sealed text,                        -- Ed25519 PKCS#8 PEM, sealed
  device_token_sealed text,                              -- hello-ok auth.deviceToken, sealed
  paired_at timestamptz,
  model text,
  last_error text,
  last_error_at timestamptz,
  oom_kills integer not null default 0,
  crash_restarts integer not null default 0,             -- consecutive restarts by reconcile
  next_restart_at timestamptz,                           -- backoff of reconcile's restarts
  started_at timestamptz,
  observed_at timestamptz,
  -- Last live sample (worker, every few seconds): the web reads these, never Docker.
  cpu_percent double precision,
  memory_bytes bigint,
  memory_limit_bytes bigint,
  pids integer,
  sampled_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create unique index instances_container_name_idx on instances (container_name);

-- Warm pool: generic gateways started and paired ahead of demand (RUNTIME_POOL_SIZE, 0 = off).
-- provision-instance claims a ready one (delete … skip locked), patches its config for the
-- tenant and takes over its container, volume, token and device. A pooled gateway has never
-- served anyone, and a claimed one never returns to the pool.
create table gateway_pool (
  id text primary key,                                   -- gwp_…
  container_name text not null unique,
  volume_name text not null,
  container_id text,
  image text not null,
  state text not null default 'starting' check (state in ('starting', 'ready')),
  gateway_token_sealed text not null,
  device_id text,
  device_private_key_sealed text,
  device_token_sealed text,
  gateway_address text,
  gateway_version text,
  created_at timestamptz not null default now(),
  ready_at timestamptz
);
