-- Warm-up tokens of pooled gateways (decision 0038): a pooled gateway's dry-run chat turn calls
-- the agents' model endpoint with a token that belongs to no user; the endpoint answers it
-- itself (no provider, nothing metered). instance_id holds the pool id (gwp_…); the token is
-- revoked when the gateway is adopted or discarded.
alter table ai_instance_tokens
  alter column user_id drop not null,
  add column warmup boolean not null default false,
  add constraint ai_instance_tokens_owner check (warmup = (user_id is null));
