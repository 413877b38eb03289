-- When a pooled gateway entered its state (decision 0038): a gateway that has been ready for a
-- while is warmed up again (state 'starting' while that runs), and a 'starting' row older than
-- the fill-pool job's expiry belongs to a filler that died; the next fill discards it.
alter table gateway_pool add column state_since timestamptz not null default now();
