-- Email change (docs/decisions/0156): a request waits for the link sent to the new address.
-- The token is stored as SHA-256, valid for a day and once; a newer request supersedes older ones.
create table email_change_tokens (
  token_hash bytea primary key,
  user_id text not null references users (id) on delete cascade,
  new_email text not null,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  used_at timestamptz
);
create index email_change_tokens_user_idx on email_change_tokens (user_id);
