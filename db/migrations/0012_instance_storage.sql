-- The size of each instance's state volume (agent workspace, memory, sessions), measured by the
-- periodic reconcile pass: the files dashboard shows it against the storage limit.
alter table instances
  add column storage_bytes bigint,
  add column storage_measured_at timestamptz;
