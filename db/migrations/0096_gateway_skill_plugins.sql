-- Marketplace skills as paid-gateway plugins (`skill:<name>`, decision 0174): what a skill call
-- costs when the skill has no price row of its own. Same as an agent turn: a skill call is one.
insert into gateway_plugin_prices (plugin, price_micro_usd) values ('skill:*', 20000)
  on conflict (plugin) do nothing;
