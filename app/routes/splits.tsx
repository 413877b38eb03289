import type { LoaderFunctionArgs, MetaFunction } from "@remix-run/node";
import { Form, useActionData, useLoaderData } from "@remix-run/react";
import { z } from "zod";
import { Card, Notice } from "../components/forms.tsx";
import { requirePageSession, signedIn } from "../server/accounts/pages.server.ts";
import {
  defineSplit,
  defineSplitSchema,
  executeSplit,
  executeSplitSchema,
  listSplits,
} from "../server/payments/splits.server.ts";
import { DomainError } from "../server/platform/errors.server.ts";
import { formAction } from "../server/platform/form-action.server.ts";

// Instant splits: define, execute, history (docs/decisions/0126, 0129). Recipients are typed one
// per line, "address bps"; the service checks them exactly as the API does.

export const meta: MetaFunction = () => [{ title: "Splits — Agent Platform" }];

export async function loader({ request }: LoaderFunctionArgs) {
  const { user } = await requirePageSession(request);
  return listSplits(user.id);
}

/** "0xabc… 5000" lines as recipients (the service's schema judges them). */
const recipientLines = (text: string) =>
  text
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter(Boolean)
    .map((l) => {
      const [address, bps] = l.split(/[\s,;]+/);
      return { address, bps: Number(bps) };
    });

function checked<S extends z.ZodType>(schema: S, value: unknown): z.output<S> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new DomainError(400, `${issue?.path.join(".") || "form"}: ${issue?.message}`);
  }
  return parsed.data;
}

export const action = /* @__PURE__ */ formAction({
  schema: z.discriminatedUnion("intent", [
    z.object({
      intent: z.literal("define"),
      name: z.string().max(100),
      recipients: z.string().max(10_000),
    }),
    z.object({
      intent: z.literal("execute"),
      splitId: z.string().max(64),
      amount: z.string().max(80),
      executionId: z.string().max(64).optional(),
    }),
  ]),
  access: signedIn,
  handler: async ({ session: { user }, value }) => {
    if (value.intent === "define") {
      const input = checked(defineSplitSchema, {
        action: "define",
        name: value.name,
        recipients: recipientLines(value.recipients),
      });
      return { defined: (await defineSplit(user.id, input)).split.id, execution: null };
    }
    const input = checked(executeSplitSchema, {
      action: "execute",
      splitId: value.splitId,
      amount: value.amount,
      ...(value.executionId ? { executionId: value.executionId } : {}),
    });
    return { defined: null, execution: (await executeSplit(user.id, input)).execution };
  },
});

export default function Splits() {
  const { splits, executions } = useLoaderData<typeof loader>();
  const done = useActionData<typeof action>();
  return (
    <div className="space-y-6">
      <h1 className="text-2xl font-semibold">Splits</h1>
      {done?.error ? <Notice tone="error">{done.error}</Notice> : null}
      {done?.value?.execution ? (
        <Notice>
          Execution {done.value.execution.id}: {done.value.execution.status}, paid{" "}
          {done.value.execution.paid} of {done.value.execution.amount}
        </Notice>
      ) : null}
      <Card title="Define a split">
        <Form method="post" className="space-y-2">
          <input type="hidden" name="intent" value="define" />
          <label className="block text-sm">
            Name <input name="name" required maxLength={100} className="rounded border px-2" />
          </label>
          <label className="block text-sm">
            Recipients, one per line: address and basis points (they sum to 10000)
            <textarea name="recipients" required rows={4} className="block w-full rounded border" />
          </label>
          <button type="submit" className="rounded-md bg-slate-900 px-3 py-1.5 text-white">
            Define
          </button>
        </Form>
      </Card>
      <Card title="Your splits">
        {splits.length === 0 ? (
          <p className="text-sm text-slate-600">No splits yet.</p>
        ) : (
          <ul className="space-y-4 text-sm" data-testid="splits">
            {splits.map((s) => (
              <li key={s.id}>
                <strong>{s.name}</strong> ({s.id}):{" "}
                {s.recipients.map((r) => `${r.address} ${r.bps / 100}%`).join(", ")}
                <Form method="post" className="mt-1 flex gap-2">
                  <input type="hidden" name="intent" value="execute" />
                  <input type="hidden" name="splitId" value={s.id} />
                  <input
                    name="amount"
                    required
                    inputMode="numeric"
                    placeholder="amount (smallest unit)"
                    className="rounded border px-2"
                  />
                  <input
                    name="executionId"
                    placeholder="execution id (optional)"
                    className="rounded border px-2"
                  />
                  <button type="submit" className="rounded border px-2">
                    Pay out
                  </button>
                </Form>
              </li>
            ))}
          </ul>
        )}
      </Card>
      <Card title="History">
        <table className="w-full text-left text-sm" data-testid="executions">
          <tbody>
            {executions.map((e) => (
              <tr key={e.id} className="border-t">
                <td>{e.id}</td>
                <td>{e.splitId}</td>
                <td>{e.amount}</td>
                <td>{e.status}</td>
                <td>
                  paid {e.paid}, remaining {e.remaining}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </Card>
    </div>
  );
}
