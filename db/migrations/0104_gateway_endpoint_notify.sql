-- Whoever holds a connection to a gateway (the web's cached clients, the worker's chat
-- recorder) drops it the moment the gateway's address changes or its instance goes: a stopped,
-- replaced or removed container's address is the engine's to give to another container, and no
-- token may follow it there (docs/decisions/0195-...). Only the address: the device token is
-- sealed anew (a new IV) at every paired connect, and a client at the same address stays valid.
-- The payload is the instance id; the listener re-reads the row.
create function notify_gateway_endpoint() returns trigger language plpgsql as $$
begin
  perform pg_notify('gateway_endpoints', old.id);
  return null;
end $$;

create trigger instances_gateway_endpoint_changed after update on instances
  for each row
  when (old.gateway_address is distinct from new.gateway_address)
  execute function notify_gateway_endpoint();
create trigger instances_gateway_endpoint_removed after delete on instances
  for each row execute function notify_gateway_endpoint();
