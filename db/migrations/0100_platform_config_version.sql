-- Which version of the platform's part of the gateway config a gateway has (decision 0170's
-- follow-up): reconcile re-applies it to a running gateway of an older one, so a platform
-- upgrade that changes that part (the Control UI, say) reaches gateways made before it. Null: made
-- before versions were recorded, so older than any.
alter table instances add column platform_config_version integer;
-- A pooled gateway's generic config, of the same versions: an older one is never adopted.
alter table gateway_pool add column config_version integer;
