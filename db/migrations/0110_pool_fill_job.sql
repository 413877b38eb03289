-- The fill-pool job attempt that is starting (or re-warming) a pooled gateway: a row whose
-- attempt is no longer active belongs to a filler that died, and is discarded at the next fill
-- or reconcile pass (issue 52; it used to wait 20 minutes). Null on rows from before.
alter table gateway_pool add column fill_job text;
alter table gateway_pool add column fill_job_id text;
alter table gateway_pool add column fill_job_attempt integer;
