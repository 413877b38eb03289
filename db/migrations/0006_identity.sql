-- Identity (issue 8): wallet sign-in (SIWE nonces, linked wallets), identity-network sessions,
-- agent verification proofs (challenges, WebAuthn authenticators, records).
-- docs/decisions/0050–0055.

-- Server-issued SIWE nonces: single use, short-lived. `used_at` is set atomically on sign-in.
create table siwe_nonces (
  nonce text primary key,                    -- viem generateSiweNonce (96 alphanumerics)
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  used_at timestamptz
);
create index siwe_nonces_expires_idx on siwe_nonces (expires_at);

-- Wallets linked to users (signed in with SIWE). Address stored checksummed (EIP-55).
create table wallet_accounts (
  address text primary key,
  user_id text not null references users (id) on delete cascade,
  chain_id integer not null,
  created_at timestamptz not null default now(),
  last_sign_in_at timestamptz not null default now()
);
create index wallet_accounts_user_idx on wallet_accounts (user_id);

-- Identity-network (idnet) sessions: the sessionToken is random; only its SHA-256 is kept.
-- A refresh rotates it (the old one is revoked).
create table idnet_sessions (
  token_hash bytea primary key,
  fid text not null,
  address text,
  access_level text not null,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  revoked_at timestamptz
);

-- Agent verification. The agents table arrives with the agents issue: agent ids are text with
-- no foreign key yet (docs/decisions/0055-agent-verification.md); add it when `agents` exists.
create table agent_verification_challenges (
  agent_id text not null,
  challenge text not null,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  used_at timestamptz,
  primary key (agent_id, challenge)
);

create table agent_verifications (
  agent_id text primary key,
  verification_type text not null check (verification_type in ('eas', 'exchange', 'ens', 'webauthn')),
  attestation_uid text,
  verifier_address text,
  metadata jsonb,
  verified_at timestamptz not null default now()
);

-- Registered WebAuthn authenticators of a user (for `webauthn` proofs).
create table webauthn_credentials (
  id text primary key,                       -- credential id, base64url
  user_id text not null references users (id) on delete cascade,
  public_key bytea not null,                 -- COSE public key
  counter bigint not null default 0,
  transports text[],
  created_at timestamptz not null default now()
);
create index webauthn_credentials_user_idx on webauthn_credentials (user_id);
