-- Instances may run on the process driver (gateways as local processes, no Docker).
alter table instances drop constraint instances_driver_check;
alter table instances add constraint instances_driver_check
  check (driver in ('docker', 'process'));
