-- The node a pooled gateway runs on (multi-node drivers: the pool is filled node by node,
-- decision 0181); null on a one-host driver.
alter table gateway_pool add column node_id text;
