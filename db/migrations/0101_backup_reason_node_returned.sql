-- A node that comes back after its instances were re-created elsewhere still holds their old
-- state volumes: that state is kept as a backup (reason 'node-returned') before the copy is
-- removed (worker/instances/recover.ts, decision 0167).
alter table agent_backups drop constraint agent_backups_reason_check;
alter table agent_backups add constraint agent_backups_reason_check check (reason in (
  'manual', 'scheduled', 'pre-update', 'pre-restore', 'pre-delete', 'imported', 'node-returned'));
