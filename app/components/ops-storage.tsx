import { Form } from "@remix-run/react";
import type { OpsStorage } from "../server/ops/storage.server.ts";
import { bytesText } from "./agent-storage.tsx";
import { Card } from "./forms.tsx";

// /ops/users/:id: the user's storage and the operator's per-user limit (decision 0217).

export function OpsStorageCard({ storage }: { storage: OpsStorage }) {
  const { usage, entitlement } = storage;
  const overrideGb =
    entitlement.source === "override"
      ? Number((entitlement.limitBytes / 1024 ** 3).toFixed(2))
      : "";
  return (
    <Card title="Storage">
      <p className="text-sm" data-testid="ops-storage">
        {bytesText(usage.usedBytes)} used
        {usage.limitBytes === null
          ? " — no limit enforced on this volume"
          : ` of ${bytesText(usage.limitBytes)} (${usage.percent} %)${usage.full ? ", full" : ""}`}
        . Owed: {bytesText(entitlement.limitBytes)} (
        {entitlement.source === "override"
          ? "operator's limit"
          : `plan${entitlement.upgradeGb ? `, upgrades ${entitlement.upgradesCount ? "" : "not counted: "}+${entitlement.upgradeGb} GB` : ""}`}
        ){usage.graceUntil ? `; lowering after ${usage.graceUntil.slice(0, 10)}` : ""}.
      </p>
      <Form method="post" className="flex items-center gap-2 text-sm">
        <input type="hidden" name="intent" value="set-storage" />
        <label htmlFor="storageGb">Limit in GB (empty: the plan's)</label>
        <input
          id="storageGb"
          name="gigabytes"
          inputMode="decimal"
          defaultValue={overrideGb}
          className="w-24 rounded border px-2 py-0.5"
        />
        <button type="submit" className="rounded border border-slate-300 px-2 py-0.5 text-xs">
          Set
        </button>
      </Form>
    </Card>
  );
}
