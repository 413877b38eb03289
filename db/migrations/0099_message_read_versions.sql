-- An agent's recorded messages move its owner's read version (decision 0176): the turn figures
-- of GET /api/agents/:id/stats are kept between messages.
create trigger agent_messages_read_version after insert or update or delete on agent_messages
  for each row execute function read_version_by_user();
create trigger agent_messages_read_version_truncate after truncate on agent_messages
  for each statement execute function read_version_everyone();
