-- A cap on concurrent wakes with a queue the user sees (issue 53, decision 0221). A wake asked
-- for waits its turn in order of wake_requested_at; wake_started_at is when it took one of the
-- platform's wake slots (it has left the line).
alter table instance_sleep add column wake_started_at timestamptz;
create index instance_sleep_wake_queue on instance_sleep (wake_requested_at, instance_id)
  where wake_requested_at is not null and wake_started_at is null;
