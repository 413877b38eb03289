-- An x402 authorisation is taken here before its plugin runs, so one PAYMENT-SIGNATURE pays for
-- one call however many requests carry it at once: the primary key is the authorisation (payer
-- and EIP-3009 nonce, the ledger's settlement purpose), and only the request whose insert wins
-- runs the plugin. A reservation is never given back: it ends settled or failed, and the payer
-- signs a new authorisation (nothing was sent on chain for a failed one).
-- docs/decisions/0199-paid-gateway-holds-and-x402-reservations.md

create table x402_reservations (
  authorization_key text primary key,        -- x402:<payer>:<nonce>, lower case
  payer text not null,
  call_id text not null unique,              -- the gateway call it pays for
  plugin text not null,
  amount numeric(78, 0) not null,            -- token units authorised
  status text not null default 'reserved' check (status in ('reserved', 'settled', 'failed')),
  error text,                                -- why it failed (plugin error, settlement reason)
  transaction text,                          -- the settlement's hash once settled
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
