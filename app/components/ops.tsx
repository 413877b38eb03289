import { Form, useActionData, useSearchParams } from "@remix-run/react";
import type { ReactNode } from "react";
import { Notice } from "./forms.tsx";

// Pieces of the operator console (/ops): the notice after an action, and one-button forms.

export function OpsNotices() {
  const [params] = useSearchParams();
  const failed = useActionData<{ error?: string }>();
  const notice = params.get("notice");
  return (
    <>
      {notice && !failed?.error ? <Notice>{notice}</Notice> : null}
      {failed?.error ? <Notice tone="error">{failed.error}</Notice> : null}
    </>
  );
}

/** A POST form of hidden fields and one button (works without JavaScript). */
export function ActionButton({
  intent,
  fields = {},
  children,
  tone = "plain",
}: {
  intent: string;
  fields?: Record<string, string>;
  children: ReactNode;
  tone?: "plain" | "danger";
}) {
  return (
    <Form method="post" className="inline">
      <input type="hidden" name="intent" value={intent} />
      {Object.entries(fields).map(([name, value]) => (
        <input key={name} type="hidden" name={name} value={value} />
      ))}
      <button
        type="submit"
        className={
          tone === "danger"
            ? "rounded border border-red-300 bg-white px-2 py-0.5 text-xs text-red-700"
            : "rounded border border-slate-300 bg-white px-2 py-0.5 text-xs"
        }
      >
        {children}
      </button>
    </Form>
  );
}

export const usd = (microUsd: number) => `$${(microUsd / 1_000_000).toFixed(2)}`;

export const mib = (bytes: number | null) =>
  bytes === null ? "—" : `${Math.round(bytes / (1024 * 1024))} MiB`;
