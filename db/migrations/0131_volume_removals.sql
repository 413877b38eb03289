-- Volume removals the engine could not do for now (decision 0248): a volume nothing uses that the
-- engine still counts as mounted (Docker before 20.10.25 after a live-restore restart), or one
-- whose removal met the engine unreachable. The teardown, restore or discard that removed it has
-- finished; reconcile tries again each pass until the engine lets the removal through.
create table volume_removals (
  volume text primary key,
  reason text not null,
  deferred_at timestamptz not null default now(),
  tried_at timestamptz not null default now(),
  attempts integer not null default 1
);
