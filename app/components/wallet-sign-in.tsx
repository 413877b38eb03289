import { useEffect, useState } from "react";
import { getAddress } from "viem";
import { createSiweMessage } from "viem/siwe";

// "Sign in with Ethereum": an injected wallet (EIP-1193, window.ethereum) builds and signs the
// SIWE message. Without JavaScript or without a wallet the button is disabled and says why.
// docs/decisions/0051-wallet-sign-in.md

interface Eip1193 {
  request(args: { method: string; params?: unknown[] }): Promise<unknown>;
}

const BASE_CHAIN_HEX = "0x2105";

export function WalletSignIn({ redirectTo }: { redirectTo: string }) {
  const [ready, setReady] = useState<"no-js" | "no-wallet" | "ok">("no-js");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    setReady((window as { ethereum?: Eip1193 }).ethereum ? "ok" : "no-wallet");
  }, []);

  async function signIn() {
    const ethereum = (window as { ethereum?: Eip1193 }).ethereum;
    if (!ethereum) return;
    setBusy(true);
    setError(null);
    try {
      const [account] = (await ethereum.request({ method: "eth_requestAccounts" })) as string[];
      if (!account) throw new Error("The wallet shared no account");
      const chainId = (await ethereum.request({ method: "eth_chainId" })) as string;
      if (chainId.toLowerCase() !== BASE_CHAIN_HEX) {
        await ethereum.request({
          method: "wallet_switchEthereumChain",
          params: [{ chainId: BASE_CHAIN_HEX }],
        });
      }
      const nonceRes = await fetch("/api/auth/wallet/nonce");
      const n = (await nonceRes.json()) as {
        nonce: string;
        domain: string;
        uri: string;
        chainId: number;
      };
      const address = getAddress(account);
      const message = createSiweMessage({
        address,
        chainId: n.chainId,
        domain: n.domain,
        uri: n.uri,
        nonce: n.nonce,
        version: "1",
        issuedAt: new Date(),
        expirationTime: new Date(Date.now() + 10 * 60_000),
        statement: "Sign in to the agent platform.",
      });
      const signature = (await ethereum.request({
        method: "personal_sign",
        params: [message, address],
      })) as string;
      const res = await fetch("/api/auth/callback/wallet", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ message, signature, callbackUrl: redirectTo }),
      });
      const body = (await res.json()) as { url?: string; error?: string };
      if (!res.ok || !body.url) throw new Error(body.error ?? `Sign-in failed (${res.status})`);
      window.location.assign(body.url);
    } catch (e) {
      setError((e as Error).message);
      setBusy(false);
    }
  }

  return (
    <div className="space-y-2">
      <button
        type="button"
        onClick={signIn}
        disabled={ready !== "ok" || busy}
        className="rounded-md border border-slate-300 bg-white px-4 py-2 text-sm font-medium hover:bg-slate-50 disabled:cursor-not-allowed disabled:text-slate-400"
      >
        {busy ? "Waiting for the wallet…" : "Sign in with Ethereum"}
      </button>
      {ready === "no-js" ? (
        <p className="text-sm text-slate-600">
          Needs a browser wallet (such as Coinbase Wallet or MetaMask) and JavaScript.
        </p>
      ) : ready === "no-wallet" ? (
        <p className="text-sm text-slate-600">
          No browser wallet found: install one (such as Coinbase Wallet or MetaMask) to sign in with
          Ethereum on Base.
        </p>
      ) : null}
      {error ? (
        <p role="alert" className="text-sm text-red-700">
          {error}
        </p>
      ) : null}
    </div>
  );
}
