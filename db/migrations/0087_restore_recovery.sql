-- A restore whose worker died part-way is recovered by reconcile (decision 0140, issue 26): it
-- needs to know when the restore began and which volumes it moved between, to put the agent
-- back on its old state and say why.
alter table agent_backups
  add column restore_started_at timestamptz,
  add column restore_old_volume text,
  add column restore_new_volume text;
