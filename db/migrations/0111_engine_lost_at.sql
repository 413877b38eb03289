-- When the engine last stopped answering (kept once it answers again): a gateway that exited
-- between then and its return was stopped by the engine's own shutdown, not crashed (issue 52).
alter table runtime_engines add column lost_at timestamptz;
