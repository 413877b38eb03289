-- Volume removals the engine refused for now (decision 0248): a volume nothing uses that the
-- engine still counts as mounted (Docker before 20.10.25 after a live-restore restart). The
-- teardown, restore or discard that removed it has finished; reconcile tries again each pass,
-- and the engine's next restart lets the removal through.
create table volume_removals (
  volume text primary key,
  reason text not null,
  deferred_at timestamptz not null default now(),
  tried_at timestamptz not null default now(),
  attempts integer not null default 1
);
