-- A credit hold lives as long as the process holding it renews it (every 20 s); the sweep
-- releases rows not renewed for a minute (a dead process's), no longer a fixed age from
-- creation: decision 0223.
alter table ai_reservations add column renewed_at timestamptz not null default now();
create index ai_reservations_renewed_idx on ai_reservations (renewed_at);
