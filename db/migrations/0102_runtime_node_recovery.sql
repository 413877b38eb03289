-- The last re-creation of a lost node's instances from their backups (the recover-node job,
-- decision 0167), shown on the console's node row as its last drain is.
alter table runtime_nodes
  add column recovery_status text
    check (recovery_status in ('requested', 'running', 'done', 'failed')),
  add column recovery_summary text,
  add column recovery_changed_at timestamptz;
