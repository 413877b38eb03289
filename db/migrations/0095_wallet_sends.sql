-- Sends from a user's hosted wallet (issue 22: the wallet page's "send"): one row per client
-- idempotency key, written once the send passed its checks and before its transfer is recorded
-- and signed (payment_transfers, purpose send:<user>:<key>, leg 0). docs/decisions/0173
create table wallet_sends (
  user_id text not null references users (id) on delete cascade,
  id text not null,                          -- the client's idempotency key
  asset text not null check (asset in ('native', 'token')),
  token text not null,                       -- the token's address, or 'native'
  to_address text not null,                  -- EIP-55 checksummed
  amount numeric(78, 0) not null check (amount > 0),
  created_at timestamptz not null default now(),
  primary key (user_id, id)
);
create index wallet_sends_user_idx on wallet_sends (user_id, created_at desc);
