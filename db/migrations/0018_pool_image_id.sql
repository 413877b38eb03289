-- The image id a pooled gateway runs: gateway/build.sh rebuilds an image under the same tag (the
-- OpenClaw version) when its inputs change, so the tag alone cannot tell a stale pooled gateway.
-- Provisioning adopts only gateways on the tag's current id; the next fill discards the others
-- (rows from before this column have none, and are discarded too).
alter table gateway_pool add column image_id text;
