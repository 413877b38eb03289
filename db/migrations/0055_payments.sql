-- Money on chain (issue 22): hosted wallets, the transfer ledger, instant splits, booking escrow.
-- Amounts are integers in the token's smallest unit (numeric(78,0): any uint256 fits).
-- docs/decisions/0125–0128.

-- One hosted wallet per owner: a user id, or `platform:escrow` for the escrow the platform
-- controls (no foreign key for that reason). The built-in driver keeps the private key sealed
-- (AES-256-GCM, app/server/platform/crypto.server.ts); another driver keeps a reference instead.
create table hosted_wallets (
  owner_id text primary key,
  driver text not null,
  address text not null unique,              -- EIP-55 checksummed
  sealed_key text,                           -- builtin driver only
  external_ref text,                         -- a hosted-wallet service's wallet id
  created_at timestamptz not null default now(),
  check ((driver = 'builtin') = (sealed_key is not null))
);

-- Every token transfer the platform sends, recorded before it is signed and reconciled with the
-- chain after. A (purpose, leg) pays once: at most one attempt that is not failed.
create table payment_transfers (
  id uuid primary key default gen_random_uuid(),
  purpose text not null,                     -- split:<user>:<execution>, booking:<id>:fund, ...
  leg integer not null check (leg >= 0),
  attempt integer not null check (attempt >= 1),
  from_owner text not null,
  from_address text not null,
  to_address text not null,
  token text not null,
  amount numeric(78, 0) not null check (amount > 0),
  status text not null default 'pending' check (status in ('pending', 'confirmed', 'failed')),
  nonce bigint,
  tx_hash text unique,
  raw_tx text,                               -- the signed transaction: re-broadcast after a crash
  block_number bigint,
  error text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (purpose, leg, attempt)
);
create unique index payment_transfers_one_live_idx
  on payment_transfers (purpose, leg) where status <> 'failed';
create index payment_transfers_pending_idx on payment_transfers (from_address) where status = 'pending';

-- Split definitions (immutable once defined: executions refer to them).
create table splits (
  id text primary key,
  user_id text not null references users (id) on delete cascade,
  name text not null,
  recipients jsonb not null,                 -- [{address, bps}], bps summing to 10000
  created_at timestamptz not null default now()
);
create index splits_user_idx on splits (user_id, created_at desc);

-- One execution of a split for an amount, keyed by the caller's execution id (idempotency).
create table split_executions (
  user_id text not null references users (id) on delete cascade,
  id text not null,
  split_id text not null references splits (id) on delete cascade,
  amount numeric(78, 0) not null check (amount > 0),
  token text not null,
  created_at timestamptz not null default now(),
  primary key (user_id, id)
);

-- Booking escrow: created → funded → settled | refunded. `closing` is the outcome chosen when
-- the payout is first attempted, so a settle and a refund can never both pay. The parties are
-- not foreign keys: deleting one account must not erase the record of money held in escrow.
create table bookings (
  id text primary key,
  booker_id text not null,
  artist_id text not null,
  artist_address text not null,
  booker_address text not null,
  escrow_address text not null,
  token text not null,
  amount numeric(78, 0) not null check (amount > 0),
  fee_bps integer not null check (fee_bps between 0 and 10000),
  fee_amount numeric(78, 0) not null check (fee_amount >= 0 and fee_amount <= amount),
  terms text not null,
  starts_at timestamptz not null,
  ends_at timestamptz not null check (ends_at >= starts_at),
  status text not null default 'created'
    check (status in ('created', 'funded', 'settled', 'refunded')),
  closing text check (closing in ('settled', 'refunded')),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  check (booker_id <> artist_id)
);
create index bookings_booker_idx on bookings (booker_id, created_at desc);
create index bookings_artist_idx on bookings (artist_id, created_at desc);

create table booking_transitions (
  booking_id text not null references bookings (id) on delete cascade,
  from_status text,
  to_status text not null,
  by_user text not null,
  transfer_hash text,
  at timestamptz not null default now(),
  primary key (booking_id, to_status)
);
