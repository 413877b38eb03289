-- Whether the engine keeps containers running while it restarts (Docker's live-restore,
-- decision 0239): recorded by the worker's engine check each time the engine answers again;
-- null where the driver has no such setting (Swarm, process) or before it was read.
alter table runtime_engines add column live_restore boolean;
