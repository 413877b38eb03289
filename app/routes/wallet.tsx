import type { LoaderFunctionArgs, MetaFunction } from "@remix-run/node";
import { Form, Link, useActionData, useLoaderData } from "@remix-run/react";
import { z } from "zod";
import { Card, Notice } from "../components/forms.tsx";
import { requirePageSession, signedIn } from "../server/accounts/pages.server.ts";
import { ensureWallet, findWallet, walletInfo } from "../server/payments/wallets.server.ts";
import { formAction } from "../server/platform/form-action.server.ts";

// The hosted wallet page: address, balances, create (docs/decisions/0125, 0129).

export const meta: MetaFunction = () => [{ title: "Wallet — Agent Platform" }];

export async function loader({ request }: LoaderFunctionArgs) {
  const { user } = await requirePageSession(request);
  if (!(await findWallet(user.id))) return { wallet: null, error: null };
  try {
    return { ...(await walletInfo(user.id)), error: null };
  } catch {
    // The chain could not be read: show the address without balances.
    return {
      wallet: { ...(await findWallet(user.id))!, balances: null },
      error: "Balances could not be read from the chain just now.",
    };
  }
}

export const action = /* @__PURE__ */ formAction({
  schema: z.object({ intent: z.literal("create") }),
  access: signedIn,
  handler: async ({ session: { user } }) => ensureWallet(user.id),
});

export default function Wallet() {
  const { wallet, error } = useLoaderData<typeof loader>();
  const done = useActionData<typeof action>();
  return (
    <div className="space-y-6">
      <h1 className="text-2xl font-semibold">Wallet</h1>
      {done?.error ? <Notice tone="error">{done.error}</Notice> : null}
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
      ) : (
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
