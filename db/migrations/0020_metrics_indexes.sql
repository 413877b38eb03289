-- The metrics endpoints (docs/decisions/0092-metrics-endpoints.md) read activity by time: a
-- user's messages since a moment (historical, performance, summary) and the whole platform's
-- over a period (GET /api/metrics, the summary's medians). ai_usage already has
-- (user_id, created_at); agent_messages was indexed by agent only.
create index agent_messages_user_created_idx on agent_messages (user_id, created_at);
create index agent_messages_created_idx on agent_messages (created_at);
create index ai_usage_created_idx on ai_usage (created_at);
