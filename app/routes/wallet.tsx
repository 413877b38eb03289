import type { LoaderFunctionArgs, MetaFunction } from "@remix-run/node";
import { Form, Link, useActionData, useLoaderData } from "@remix-run/react";
import { z } from "zod";
import { Card, Notice } from "../components/forms.tsx";
import { requirePageSession, signedIn } from "../server/accounts/pages.server.ts";
import {
  listSends,
  reviewSend,
  SEND_ASSETS,
  sendFromWallet,
  sendSchema,
} from "../server/payments/wallet-sends.server.ts";
import { ensureWallet, findWallet, walletInfo } from "../server/payments/wallets.server.ts";
import { DomainError } from "../server/platform/errors.server.ts";
import { formAction } from "../server/platform/form-action.server.ts";

// The hosted wallet page: address, balances, create, send (docs/decisions/0125, 0129, 0173).
// A send takes two posts: "review" turns the typed decimal amount into smallest units and checks
// the balance, then "send" (the confirmation, carrying the review's idempotency key) pays.

export const meta: MetaFunction = () => [{ title: "Wallet — Agent Platform" }];

export async function loader({ request }: LoaderFunctionArgs) {
  const { user } = await requirePageSession(request);
  if (!(await findWallet(user.id))) return { wallet: null, sends: [], error: null };
  const sends = await listSends(user.id);
  try {
    return { ...(await walletInfo(user.id)), sends, error: null };
  } catch {
    // The chain could not be read: show the address without balances.
    return {
      wallet: { ...(await findWallet(user.id))!, balances: null },
      sends,
      error: "Balances could not be read from the chain just now.",
    };
  }
}

const asset = z.enum(SEND_ASSETS);

export const action = /* @__PURE__ */ formAction({
  schema: z.discriminatedUnion("intent", [
    z.object({ intent: z.literal("create") }),
    z.object({
      intent: z.literal("review"),
      asset,
      to: z.string({ error: "Enter the address to send to" }).trim().max(42),
      amount: z.string({ error: "Enter an amount" }).trim().max(100),
    }),
    z.object({
      intent: z.literal("send"),
      asset,
      to: z.string().max(42),
      amount: z.string().max(80),
      idempotencyKey: z.string().max(64),
    }),
  ]),
  fields: ["to", "amount"],
  access: signedIn,
  handler: async ({ session: { user }, value }) => {
    if (value.intent === "create") {
      return { ...(await ensureWallet(user.id)), review: null, send: null };
    }
    if (value.intent === "review") {
      const to = sendSchema.shape.to.safeParse(value.to);
      if (!to.success) throw new DomainError(400, `to: ${to.error.issues[0]?.message}`);
      const { review } = await reviewSend(user.id, { ...value, to: to.data });
      return { wallet: null, created: false, review, send: null };
    }
    const { intent: _, ...fields } = value;
    const parsed = sendSchema.safeParse({ ...fields, action: "send" });
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new DomainError(400, `${issue?.path.join(".")}: ${issue?.message}`);
    }
    const { action: __, ...input } = parsed.data;
    const { send } = await sendFromWallet(user.id, input);
    return { wallet: null, created: false, review: null, send };
  },
});

export default function Wallet() {
  const { wallet, sends, error } = useLoaderData<typeof loader>();
  const done = useActionData<typeof action>();
  const review = done?.value?.review;
  const sent = done?.value?.send;
  const refused = done?.result.error as Record<string, string[] | null> | undefined;
  return (
    <div className="space-y-6">
      <h1 className="text-2xl font-semibold">Wallet</h1>
      {done?.error ? <Notice tone="error">{done.error}</Notice> : null}
      {refused?.to ? <Notice tone="error">Address: {refused.to.join("; ")}</Notice> : null}
      {refused?.amount ? <Notice tone="error">Amount: {refused.amount.join("; ")}</Notice> : null}
      {sent ? (
        <Notice>
          Sent {sent.amount} (smallest unit) to {sent.to}: {sent.status}
          {sent.hash ? `, transaction ${sent.hash}` : ""}
        </Notice>
      ) : null}
      {error ? <Notice tone="error">{error}</Notice> : null}
      {wallet ? (
        <Card title="Your hosted wallet">
          <dl className="grid grid-cols-[10rem_1fr] gap-1 text-sm" data-testid="wallet">
            <dt>Address</dt>
            <dd className="break-all font-mono">{wallet.address}</dd>
            <dt>Chain</dt>
            <dd>{wallet.chainId}</dd>
            {wallet.balances ? (
              <>
                <dt>{wallet.balances.native.symbol}</dt>
                <dd>
                  {wallet.balances.native.amount} (smallest unit, {wallet.balances.native.decimals}{" "}
                  decimals)
                </dd>
                <dt>{wallet.balances.token.symbol}</dt>
                <dd>
                  {wallet.balances.token.amount} (smallest unit, {wallet.balances.token.decimals}{" "}
                  decimals)
                </dd>
              </>
            ) : null}
          </dl>
          <p className="mt-3 text-sm">
            <Link className="underline" to="/splits">
              Splits
            </Link>{" "}
            ·{" "}
            <Link className="underline" to="/bookings">
              Bookings
            </Link>
          </p>
        </Card>
      ) : null}
      {wallet && review ? (
        <Card title="Confirm the send">
          <p className="text-sm" data-testid="send-review">
            Send <strong>{review.shown}</strong> ({review.amount} in the smallest unit) to{" "}
            <span className="break-all font-mono">{review.to}</span> from your hosted wallet. This
            cannot be undone.
          </p>
          <div className="mt-3 flex gap-2">
            <Form method="post">
              <input type="hidden" name="intent" value="send" />
              <input type="hidden" name="asset" value={review.asset} />
              <input type="hidden" name="to" value={review.to} />
              <input type="hidden" name="amount" value={review.amount} />
              <input type="hidden" name="idempotencyKey" value={review.idempotencyKey} />
              <button type="submit" className="rounded-md bg-slate-900 px-3 py-1.5 text-white">
                Confirm and send
              </button>
            </Form>
            <Link to="/wallet" className="rounded-md border px-3 py-1.5">
              Cancel
            </Link>
          </div>
        </Card>
      ) : null}
      {wallet && !review ? (
        <Card title="Send">
          <Form method="post" className="space-y-2 text-sm">
            <input type="hidden" name="intent" value="review" />
            <label className="block">
              Asset{" "}
              <select name="asset" className="rounded border px-2">
                <option value="token">{wallet.balances?.token.symbol ?? "Token"}</option>
                <option value="native">{wallet.balances?.native.symbol ?? "Native coin"}</option>
              </select>
            </label>
            <label className="block">
              To{" "}
              <input
                name="to"
                required
                pattern="0x[0-9a-fA-F]{40}"
                placeholder="0x…"
                className="w-full rounded border px-2 font-mono"
              />
            </label>
            <label className="block">
              Amount{" "}
              <input
                name="amount"
                required
                inputMode="decimal"
                placeholder="e.g. 12.5"
                className="rounded border px-2"
              />
            </label>
            <button type="submit" className="rounded-md bg-slate-900 px-3 py-1.5 text-white">
              Review
            </button>
          </Form>
        </Card>
      ) : null}
      {wallet && sends.length > 0 ? (
        <Card title="Sends">
          <table className="w-full text-left text-sm" data-testid="sends">
            <tbody>
              {sends.map((s) => (
                <tr key={s.id} className="border-t">
                  <td>{s.createdAt.slice(0, 16).replace("T", " ")}</td>
                  <td>{s.asset}</td>
                  <td>{s.amount}</td>
                  <td className="break-all font-mono">{s.to}</td>
                  <td>{s.status}</td>
                  <td className="break-all font-mono">{s.hash}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </Card>
      ) : null}
      {wallet ? null : (
        <Card title="No wallet yet">
          <p className="text-sm text-slate-600">
            The platform keeps the key of a hosted wallet for you; it never leaves the server.
          </p>
          <Form method="post" className="mt-3">
            <input type="hidden" name="intent" value="create" />
            <button type="submit" className="rounded-md bg-slate-900 px-3 py-1.5 text-white">
              Create my wallet
            </button>
          </Form>
        </Card>
      )}
    </div>
  );
}
