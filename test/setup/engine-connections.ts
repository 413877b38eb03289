import type http from "node:http";
import { engineAgents } from "../../worker/runtime/docker-engine.ts";

// msw is for third-party HTTP. Its Node interceptors take over every socket a test process
// opens, and with the Docker engine's unix socket behind them answers went missing under load:
// an inspect that never returned held an update's instance lock until its test's bound (3 of 12
// runs of three Docker files side by side; 0 of 9 without msw), and with connections not kept
// alive engine calls failed with EPIPE. The engine's connections are made as the interceptors'
// own passthrough connections are: plain sockets (decision 0233).

interface InternalConnections {
  run<T>(callback: () => T): T;
}

export function keepEngineOutOfMsw(): void {
  const internal = (globalThis as { __MSW_INTERNAL_CONNECTION_CONTEXT?: InternalConnections })
    .__MSW_INTERNAL_CONNECTION_CONTEXT;
  // Loud rather than silently intercepted again when msw changes how it marks its own sockets.
  if (!internal) throw new Error("msw's internal connection context is missing (decision 0233)");
  const agents: http.Agent[] = [engineAgents.http, engineAgents.https];
  for (const agent of agents) {
    const create = agent.createConnection.bind(agent);
    agent.createConnection = (options, callback) => internal.run(() => create(options, callback));
  }
}
