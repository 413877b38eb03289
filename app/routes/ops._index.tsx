import type { LoaderFunctionArgs } from "@remix-run/node";
import { useLoaderData } from "@remix-run/react";
import { Fragment } from "react";
import { Card } from "../components/forms.tsx";
import { usd } from "../components/ops.tsx";
import { storageEnforcement } from "../server/agents/storage.server.ts";
import { requireOperator } from "../server/ops/access.server.ts";
import { opsOverview } from "../server/ops/overview.server.ts";

export async function loader({ request }: LoaderFunctionArgs) {
  await requireOperator(request);
  const [overview, storage] = await Promise.all([opsOverview(), storageEnforcement()]);
  return { ...overview, storage };
}

export default function OpsOverview() {
  const { metrics, pool, providers, aiStatus, operations, storage } =
    useLoaderData<typeof loader>();
  const day = metrics.last24h;
  return (
    <div className="grid gap-6 md:grid-cols-2">
      <Card title="Platform">
        <dl className="grid grid-cols-2 gap-1 text-sm" data-testid="ops-platform">
          <dt>Users</dt>
          <dd>{metrics.users}</dd>
          <dt>Agents</dt>
          <dd>{metrics.agents}</dd>
          <dt>Instances (running)</dt>
          <dd>
            {metrics.instances.total} ({metrics.instances.running})
          </dd>
          <dt>Active users, 24 h</dt>
          <dd>{day.activeUsers}</dd>
          <dt>Messages, 24 h</dt>
          <dd>{day.messages ?? "—"}</dd>
          <dt>AI calls, 24 h</dt>
          <dd>{day.aiCalls ?? "—"}</dd>
          <dt>Version</dt>
          <dd>{metrics.version}</dd>
        </dl>
      </Card>
      <Card title="Warm pool">
        <dl className="grid grid-cols-2 gap-1 text-sm" data-testid="ops-pool">
          <dt>Size</dt>
          <dd>{pool.size}</dd>
          <dt>Ready</dt>
          <dd>{pool.ready}</dd>
          <dt>Filling</dt>
          <dd>{pool.filling}</dd>
        </dl>
      </Card>
      <Card title="Operations">
        <dl className="grid grid-cols-2 gap-1 text-sm" data-testid="ops-operations">
          {Object.entries(operations.instancesByState).map(([state, count]) => (
            <Fragment key={state}>
              <dt>Instances {state}</dt>
              <dd>{count}</dd>
            </Fragment>
          ))}
          <dt>Engine</dt>
          <dd>{operations.engineUp === null ? "—" : operations.engineUp ? "up" : "down"}</dd>
          <dt>Engine restarts</dt>
          <dd data-testid="ops-live-restore">
            {/* Decision 0239: without live-restore an engine restart stops every gateway. */}
            {operations.engineLiveRestore === null
              ? "—"
              : operations.engineLiveRestore
                ? "gateways keep running (live-restore)"
                : "stop every gateway (live-restore off)"}
          </dd>
          <dt>Volume removals deferred</dt>
          <dd data-testid="ops-volume-removals-deferred">
            {/* Decision 0248: an engine before 20.10.25 frees them only when it restarts. */}
            {operations.volumeRemovalsDeferred === 0
              ? "none"
              : `${operations.volumeRemovalsDeferred} (reconcile retries each minute)`}
          </dd>
          <dt>Storage limits</dt>
          <dd data-testid="ops-storage-enforcement">
            {/* As the worker found them at its start (decision 0216): never silently off. */}
            {storage ? `${storage.enforced ? "enforced" : "NOT enforced"}: ${storage.detail}` : "—"}
          </dd>
          <dt>Jobs waiting (oldest)</dt>
          <dd>
            {operations.jobsWaiting} ({Math.round(operations.oldestJobWaitSeconds)} s)
          </dd>
          <dt>Jobs failed</dt>
          <dd>{operations.jobsFailed}</dd>
          <dt>Backups ready / failed</dt>
          <dd>
            {operations.backups.byStatus.ready ?? 0} / {operations.backups.byStatus.failed ?? 0}
          </dd>
          <dt>Credit ledger</dt>
          <dd>{usd(operations.ledger.ledgerMicroUsd)}</dd>
          <dt>Ledger drift</dt>
          <dd>{usd(operations.ledger.driftMicroUsd)}</dd>
          <dt>Uncollected</dt>
          <dd data-testid="ops-uncollected">{usd(operations.ledger.uncollectedMicroUsd)}</dd>
        </dl>
      </Card>
      <Card title={`AI providers (${aiStatus})`}>
        {providers.length === 0 ? (
          <p className="text-sm text-slate-600">No provider is configured.</p>
        ) : (
          <table className="w-full text-left text-sm" data-testid="ops-providers">
            <thead className="text-slate-500">
              <tr>
                <th>Provider</th>
                <th>Health</th>
                <th>Cool-down until</th>
                <th>Calls today</th>
                <th>Spend today</th>
              </tr>
            </thead>
            <tbody>
              {providers.map((p) => (
                <tr key={p.name}>
                  <td>{p.name}</td>
                  <td>{p.healthy ? "up" : "down"}</td>
                  <td>{p.coolingUntil ?? "—"}</td>
                  <td>{p.callsToday}</td>
                  <td>{usd(p.spendTodayMicroUsd)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </Card>
    </div>
  );
}
