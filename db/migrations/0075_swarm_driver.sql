-- Instances may run on the Swarm driver (one service per instance, pinned to its node).
alter table instances drop constraint instances_driver_check;
alter table instances add constraint instances_driver_check
  check (driver in ('docker', 'process', 'swarm'));
