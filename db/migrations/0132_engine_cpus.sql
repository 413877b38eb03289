-- The single engine host's CPU count, as the worker's engine check reads it (decision 0251): the
-- web sizes the host's chat-turn budget from it. Null until a worker has read it, or for a
-- driver that cannot tell (then no budget applies). A Swarm's nodes carry theirs in
-- runtime_nodes.nano_cpus.
alter table runtime_engines add column cpus integer;
