import { Form, useRevalidator } from "@remix-run/react";
import { useEffect, useState } from "react";
import { assertChallenge, webauthnSupported } from "./webauthn.ts";

// The agent page's verification panel: the record, an EAS attestation form (a plain post, works
// without JavaScript), and the proofs that need a signature over a platform challenge — the
// owner's wallet (exchange), a wallet with an ENS name (ens), or a security key (webauthn).
// docs/decisions/0054-verification-proofs.md, 0056-webauthn-registration.md

export interface VerificationView {
  verified: boolean;
  verificationType: string | null;
  attestationUid: string | null;
  verifierAddress?: string | null;
  verifiedAt: string | null;
}

interface Eip1193 {
  request(args: { method: string; params?: unknown[] }): Promise<unknown>;
}

const ethereum = () => (window as { ethereum?: Eip1193 }).ethereum;

export function VerificationPanel({
  agentId,
  verification,
  securityKeyIds,
}: {
  agentId: string;
  verification: VerificationView;
  securityKeyIds: string[];
}) {
  const [caps, setCaps] = useState({ js: false, wallet: false, webauthn: false });
  const [busy, setBusy] = useState<string | null>(null);
  const [message, setMessage] = useState<{ tone: "ok" | "error"; text: string } | null>(null);
  const revalidator = useRevalidator();

  useEffect(() => {
    setCaps({ js: true, wallet: Boolean(ethereum()), webauthn: webauthnSupported() });
  }, []);

  async function prove(kind: "exchange" | "ens" | "webauthn") {
    setBusy(kind);
    setMessage(null);
    try {
      const challengeRes = await fetch(`/api/agents/${agentId}/verify/challenge`, {
        method: "POST",
      });
      const challenge = (await challengeRes.json()) as { challenge?: string; error?: string };
      if (!challenge.challenge) throw new Error(challenge.error ?? "No challenge");
      let body: Record<string, string>;
      if (kind === "webauthn") {
        body = {
          verificationType: "webauthn",
          signature: await assertChallenge(challenge.challenge, securityKeyIds),
        };
      } else {
        const wallet = ethereum();
        if (!wallet) throw new Error("No browser wallet found");
        const [account] = (await wallet.request({ method: "eth_requestAccounts" })) as string[];
        if (!account) throw new Error("The wallet shared no account");
        const signature = (await wallet.request({
          method: "personal_sign",
          params: [challenge.challenge, account],
        })) as string;
        body = { verificationType: kind, signature, walletAddress: account };
      }
      const res = await fetch(`/api/agents/${agentId}/verify`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      const result = (await res.json()) as { error?: string };
      if (!res.ok) throw new Error(result.error ?? `Verification failed (${res.status})`);
      setMessage({ tone: "ok", text: `Verified (${kind}).` });
      revalidator.revalidate();
    } catch (e) {
      setMessage({ tone: "error", text: (e as Error).message });
    } finally {
      setBusy(null);
    }
  }

  return (
    <div className="space-y-3 text-sm">
      <p data-testid="verification">
        {verification.verified ? (
          <>
            Verified by <strong>{verification.verificationType}</strong>
            {verification.verifiedAt
              ? ` on ${new Date(verification.verifiedAt).toUTCString()}`
              : ""}
            {verification.attestationUid ? (
              <>
                {" "}
                (attestation <code className="break-all">{verification.attestationUid}</code>)
              </>
            ) : null}
          </>
        ) : (
          "Not verified."
        )}
      </p>
      {verification.verified ? (
        <Form method="post">
          <input type="hidden" name="intent" value="unverify" />
          <button type="submit" className="text-red-700 underline">
            Remove verification
          </button>
        </Form>
      ) : (
        <>
          <Form method="post" className="flex flex-wrap items-end gap-2">
            <input type="hidden" name="intent" value="verify-eas" />
            <label className="flex flex-col gap-1">
              <span className="text-slate-600">EAS attestation UID</span>
              <input
                name="attestationUid"
                required
                pattern="0x[0-9a-fA-F]{64}"
                placeholder="0x…"
                className="w-96 max-w-full rounded border border-slate-300 px-2 py-1 font-mono"
              />
            </label>
            <button type="submit" className="rounded bg-indigo-600 px-3 py-1.5 text-white">
              Verify with EAS
            </button>
          </Form>
          <div className="flex flex-wrap gap-2">
            <button
              type="button"
              disabled={!caps.wallet || busy !== null}
              onClick={() => prove("exchange")}
              className="rounded border border-slate-300 px-3 py-1.5 disabled:opacity-50"
            >
              {busy === "exchange" ? "Waiting for the wallet…" : "Sign with my wallet"}
            </button>
            <button
              type="button"
              disabled={!caps.wallet || busy !== null}
              onClick={() => prove("ens")}
              className="rounded border border-slate-300 px-3 py-1.5 disabled:opacity-50"
            >
              {busy === "ens" ? "Waiting for the wallet…" : "Sign with my ENS wallet"}
            </button>
            <button
              type="button"
              disabled={!caps.webauthn || securityKeyIds.length === 0 || busy !== null}
              onClick={() => prove("webauthn")}
              className="rounded border border-slate-300 px-3 py-1.5 disabled:opacity-50"
            >
              {busy === "webauthn" ? "Waiting for the key…" : "Use a security key"}
            </button>
          </div>
          <p className="text-slate-500">
            {!caps.js
              ? "Wallet and security-key proofs need JavaScript; the EAS form works without it."
              : !caps.wallet
                ? "No browser wallet found for the signature proofs. "
                : ""}
            {caps.js && securityKeyIds.length === 0 ? (
              <>
                Add a security key in <a href="/settings">settings</a> to verify with it.
              </>
            ) : null}
          </p>
        </>
      )}
      {message ? (
        <p role="status" className={message.tone === "ok" ? "text-emerald-700" : "text-red-700"}>
          {message.text}
        </p>
      ) : null}
    </div>
  );
}
