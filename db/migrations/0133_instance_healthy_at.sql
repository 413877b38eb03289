-- When an observation last saw the instance's gateway answer /healthz (decision 0253). A running
-- gateway that has not answered since its container started, for twice the boot bound, is a hung
-- boot: reconcile restarts it. One that answered once and is slow now is never restarted for it.
alter table instances add column healthy_at timestamptz;
-- A gateway healthy at its last observation answered since it started.
update instances set healthy_at = observed_at where health = 'healthy';
