-- Agents API (issue 5).
-- Verification records and challenges belong to agents (decision 0055 left them keyed by plain
-- text until the agents table existed): rows of agents that do not exist are dropped, then the
-- foreign keys make deleting an agent delete its verification.
delete from agent_verifications v where not exists (select 1 from agents a where a.id = v.agent_id);
delete from agent_verification_challenges c
  where not exists (select 1 from agents a where a.id = c.agent_id);
alter table agent_verifications
  add constraint agent_verifications_agent_fk
  foreign key (agent_id) references agents (id) on delete cascade;
alter table agent_verification_challenges
  add constraint agent_verification_challenges_agent_fk
  foreign key (agent_id) references agents (id) on delete cascade;

-- The sampler's network counters (bytes since the container started), for agent stats.
alter table instances
  add column network_rx_bytes bigint,
  add column network_tx_bytes bigint;
