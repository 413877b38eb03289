-- Wake slots per node (issue 53, decision 0221 amended): on a Swarm each node wakes its own
-- gateways on its own CPU, so a wake waits only behind wakes on its node. The worker running a
-- wake's job records the node here before it waits; null until then (counted as any node's).
alter table instance_sleep add column wake_node text;
